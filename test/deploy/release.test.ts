// The release files of scripts/release.ts, on this machine's target only (the other targets are
// cross-compiled by `bun run release` and checked by `bun run release:check`, not here): archive names for
// every target, and the host's archive packaged from dist/dbm (built once per test run) — its name, its
// entries and modes, SHA256SUMS as `sha256sum -c` reads it, and the binary inside printing its build stamp.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pkg from '../../package.json' with { type: 'json' }
import { buildStamp } from '../../scripts/build.ts'
import { archiveName, hostTarget, packageTarget, releaseTargets, writeChecksums } from '../../scripts/release.ts'
import { builtBinary } from '../support/binary.ts'
import { repoRoot, runCommand } from '../support/process.ts'

const tmpRoot = mkdtempSync(join(tmpdir(), 'dbm-release-test-'))
afterAll(() => rmSync(tmpRoot, { recursive: true, force: true }))

/** `dbm version` of a build: version, stamped commit and date, the Bun runtime, the platform. */
const stampedVersion = (platform: string) =>
  new RegExp(
    `^dbm ${pkg.version.replaceAll('.', '\\.')}\\ncommit: {3}[0-9a-f]{40}(-dirty)?\\nbuilt: {4}\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ\\nbun: {6}${Bun.version.replaceAll('.', '\\.')}\\nplatform: ${platform}\\n$`,
  )

describe('release archive names', () => {
  test('one archive per target: dbm-<version>-<os>-<arch>.tar.gz, .zip for Windows', () => {
    expect(releaseTargets.map((t) => archiveName('0.1.0', t))).toEqual([
      'dbm-0.1.0-linux-x64.tar.gz',
      'dbm-0.1.0-linux-arm64.tar.gz',
      'dbm-0.1.0-darwin-arm64.tar.gz',
      'dbm-0.1.0-darwin-x64.tar.gz',
      'dbm-0.1.0-windows-x64.zip',
    ])
  })
})

const host = hostTarget()

describe.skipIf(host?.archive !== 'tar.gz')('the host archive from dist/dbm', () => {
  const outDir = join(tmpRoot, 'release')
  const extracted = join(tmpRoot, 'extracted')
  let binary = ''
  let archive = ''

  beforeAll(async () => {
    binary = await builtBinary()
    // Level 1: this checks the packaging, not the compression ratio (level 6 takes 2.5 times as long).
    archive = await packageTarget({
      binary,
      target: host!,
      version: pkg.version,
      stamp: await buildStamp(),
      outDir,
      gzipLevel: 1,
    })
    await writeChecksums(outDir)
  }, 180_000)

  test('dist/dbm prints its version, the commit and date it was built from, Bun and the platform', async () => {
    const [out, long] = await Promise.all([runCommand([binary, 'version']), runCommand([binary, '--version'])])
    expect(long).toEqual(out)
    expect(out.exitCode).toBe(0)
    expect(out.stderr).toBe('')
    expect(out.stdout).toMatch(stampedVersion(host!.name))
  })

  test('the archive is named for the version and target and holds one folder of that name', async () => {
    const stem = `dbm-${pkg.version}-${host!.name}`
    expect(archive).toBe(join(outDir, `${stem}.tar.gz`))
    const listing = await runCommand(['tar', '-tvzf', archive])
    expect(listing.exitCode).toBe(0)
    const entries = listing.stdout
      .trim()
      .split('\n')
      .map((line) => {
        const [mode, owner, , , , name] = line.split(/\s+/)
        return `${mode} ${owner} ${name}`
      })
    const units = ['dbm-agent.service', 'dbm-serve.service', 'dbm.sysusers.conf', 'dbm.tmpfiles.conf']
    expect(entries.sort()).toEqual(
      [
        `drwxr-xr-x 0/0 ${stem}/`,
        `-rwxr-xr-x 0/0 ${stem}/dbm`,
        `-rw-r--r-- 0/0 ${stem}/README.txt`,
        ...(existsSync(join(repoRoot, 'LICENSE')) ? [`-rw-r--r-- 0/0 ${stem}/LICENSE`] : []),
        `drwxr-xr-x 0/0 ${stem}/systemd/`,
        ...units.map((u) => `-rw-r--r-- 0/0 ${stem}/systemd/${u}`),
      ].sort(),
    )
  })

  test('the binary in the archive is dist/dbm and runs; README.txt names the version, target and commit', async () => {
    const stem = `dbm-${pkg.version}-${host!.name}`
    mkdirSync(extracted, { recursive: true })
    expect((await runCommand(['tar', '-xzf', archive, '-C', extracted])).exitCode).toBe(0)
    const inside = join(extracted, stem, 'dbm')
    expect(statSync(inside).size).toBe(statSync(binary).size)
    expect(await Bun.file(inside).bytes()).toEqual(await Bun.file(binary).bytes())
    const out = await runCommand([inside, 'version'])
    expect(out.stdout).toMatch(stampedVersion(host!.name))
    const commit = /^commit: +(\S+)$/m.exec(out.stdout)![1]!
    const readme = readFileSync(join(extracted, stem, 'README.txt'), 'utf8')
    expect(readme).toStartWith(`dbm ${pkg.version} for ${host!.name}\nBuilt `)
    expect(readme).toContain(` from commit ${(await buildStamp()).commit}.\n`)
    expect(commit).toMatch(/^[0-9a-f]{40}(-dirty)?$/)
  })

  test('SHA256SUMS lists the archive as "<sha256>  <name>" and `sha256sum -c` accepts it', async () => {
    const sums = readFileSync(join(outDir, 'SHA256SUMS'), 'utf8')
    const expected = new Bun.CryptoHasher('sha256').update(await Bun.file(archive).bytes()).digest('hex')
    expect(sums).toBe(`${expected}  ${archiveName(pkg.version, host!)}\n`)
    if (!Bun.which('sha256sum')) return
    const check = await runCommand(['sha256sum', '-c', 'SHA256SUMS'], { cwd: outDir })
    expect(check).toEqual({ exitCode: 0, stdout: `${archiveName(pkg.version, host!)}: OK\n`, stderr: '' })
    // A changed archive fails the check.
    const copy = join(tmpRoot, 'tampered')
    mkdirSync(copy, { recursive: true })
    writeFileSync(join(copy, 'SHA256SUMS'), sums)
    writeFileSync(join(copy, archiveName(pkg.version, host!)), 'not the archive')
    expect((await runCommand(['sha256sum', '-c', 'SHA256SUMS'], { cwd: copy })).exitCode).toBe(1)
  })
})
