// Checks the release files that `bun run release` wrote (release/, or --dir DIR), as a self-hoster would
// use them: `sha256sum -c SHA256SUMS`; each archive holds exactly its folder with the binary, README.txt,
// LICENSE when the repository has one and (Linux) the systemd units; each binary is of its platform
// (`file`). The binaries this machine can run are run: the host's directly, linux-arm64 under Debian's
// qemu-user-static on an x64 machine (`qemu-aarch64-static -L /usr/aarch64-linux-gnu ./dbm`: no binfmt
// needed; the binary links glibc dynamically, so Debian's libc6-arm64-cross gives qemu its C library). Run means
// `dbm version` (the release's version, commit and platform) and `dbm serve` on a port the OS picks until
// GET /healthz answers 200 with the version, then SIGTERM and a clean exit.
//
//   bun run release:check [--dir DIR] [--target NAME ...]
//
// Exits 0 when every check passed, 1 otherwise (each failure printed as one line).
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { $ } from 'bun'
import pkg from '../package.json' with { type: 'json' }
import { type ReleaseTarget, archiveName, hostTarget, releaseStem, releaseTargets, sha256 } from './release.ts'

const repoRoot = join(import.meta.dir, '..')
/** How long a binary under emulation may take to answer /healthz: qemu runs JavaScriptCore's JIT slowly. */
const SERVE_DEADLINE_MS = 180_000

const { values } = parseArgs({
  args: Bun.argv.slice(2),
  options: { dir: { type: 'string' }, target: { type: 'string', multiple: true } },
})
const dir = values.dir ?? join(repoRoot, 'release')
const version = pkg.version
const failures: string[] = []
const fail = (what: string) => {
  failures.push(what)
  console.log(`FAIL ${what}`)
}
const ok = (what: string) => console.log(`ok   ${what}`)

/** Where the aarch64 C library is for qemu (`-L`): the arm64 binary links glibc dynamically. */
const aarch64Sysroots = [process.env.QEMU_LD_PREFIX, '/usr/aarch64-linux-gnu'].filter((d): d is string => !!d)

/** The command that runs a binary of `t` here; `fail` when it should run here but cannot; `skip` when it never can. */
function runnerFor(t: ReleaseTarget): { prefix: string[] } | { skip: string } | { fail: string } {
  const host = hostTarget()
  if (host?.name === t.name) return { prefix: [] }
  if (t.name === 'linux-arm64' && host?.name === 'linux-x64') {
    const qemu = Bun.which('qemu-aarch64-static')
    if (!qemu) return { fail: 'qemu-aarch64-static is not installed (Debian: apt-get install qemu-user-static)' }
    const sysroot = aarch64Sysroots.find((d) => existsSync(join(d, 'lib', 'ld-linux-aarch64.so.1')))
    if (!sysroot)
      return {
        fail: 'no aarch64 C library for qemu (Debian: apt-get install libc6-arm64-cross; or set QEMU_LD_PREFIX)',
      }
    return { prefix: [qemu, '-L', sysroot] }
  }
  return { skip: `a ${t.name} binary does not run on ${host?.name ?? process.platform}` }
}

/** What `file` must say of each platform's binary. */
const fileKinds: Record<string, RegExp> = {
  'linux-x64': /ELF 64-bit LSB executable, x86-64/,
  'linux-arm64': /ELF 64-bit LSB executable, ARM aarch64/,
  'darwin-arm64': /Mach-O 64-bit arm64 executable/,
  'darwin-x64': /Mach-O 64-bit x86_64 executable/,
  'windows-x64': /PE32\+ executable \(console\) x86-64/,
}

/** Whether a 64-bit Mach-O binary carries a code signature (LC_CODE_SIGNATURE pointing at a signature
 * superblob): Apple silicon refuses to run an unsigned arm64 binary, and one cross-compiled from Linux gets
 * only the ad-hoc signature Bun writes. Whether macOS accepts it is not checked here (no macOS). */
async function machoSigned(path: string): Promise<boolean> {
  const file = Bun.file(path)
  const head = new DataView(await file.slice(0, 65536).arrayBuffer())
  if (head.getUint32(0, true) !== 0xfeedfacf) return false
  let offset = 32
  for (let i = 0, n = head.getUint32(16, true); i < n; i++) {
    const [cmd, size] = [head.getUint32(offset, true), head.getUint32(offset + 4, true)]
    if (cmd === 0x1d) {
      const blob = new DataView(
        await file.slice(head.getUint32(offset + 8, true), head.getUint32(offset + 8, true) + 4).arrayBuffer(),
      )
      return blob.getUint32(0, false) === 0xfade0cc0
    }
    offset += size
  }
  return false
}

async function checkServe(command: string[], t: ReleaseTarget, work: string) {
  const started = performance.now()
  const proc = Bun.spawn([...command, 'serve', '--listen', '127.0.0.1:0', '--data-dir', join(work, 'data')], {
    cwd: work,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: work },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  let log = ''
  const address = await new Promise<string | undefined>((resolve) => {
    const timer = setTimeout(() => resolve(undefined), SERVE_DEADLINE_MS)
    const read = async (stream: ReadableStream<Uint8Array>) => {
      const decoder = new TextDecoder()
      for await (const chunk of stream) {
        log += decoder.decode(chunk, { stream: true })
        const found = /dbm serve listening .*address=(\S+)/.exec(log)?.[1]
        if (found) {
          clearTimeout(timer)
          resolve(found)
        }
      }
    }
    void read(proc.stdout)
    void read(proc.stderr)
    void proc.exited.then(() => {
      clearTimeout(timer)
      resolve(undefined)
    })
  })
  if (!address) {
    proc.kill('SIGKILL')
    fail(`${t.name}: dbm serve did not start listening (exit ${proc.exitCode}):\n${log.trim()}`)
    return
  }
  const res = await fetch(`http://${address}/healthz`).catch((e: Error) => e)
  const body =
    res instanceof Error
      ? undefined
      : ((await res.json().catch(() => undefined)) as { status?: string; version?: string } | undefined)
  const startMs = Math.round(performance.now() - started)
  if (!(res instanceof Error) && res.status === 200 && body?.status === 'ok' && body.version === version) {
    ok(
      `${t.name}: dbm serve answered GET /healthz 200 {"status":"ok","version":"${version}"} (${startMs} ms from start)`,
    )
  } else {
    fail(`${t.name}: GET /healthz: ${res instanceof Error ? res.message : `${res.status} ${JSON.stringify(body)}`}`)
  }
  proc.kill('SIGTERM')
  const exitCode = await Promise.race([proc.exited, Bun.sleep(30_000).then(() => 'timeout' as const)])
  if (exitCode === 0) ok(`${t.name}: dbm serve stopped on SIGTERM with exit 0`)
  else {
    proc.kill('SIGKILL')
    fail(`${t.name}: dbm serve on SIGTERM: exit ${exitCode}`)
  }
}

/** The commit each archive's README.txt names: one release is one commit. */
const commits = new Map<string, string>()

async function checkTarget(t: ReleaseTarget) {
  const archive = join(dir, archiveName(version, t))
  if (!existsSync(archive)) {
    fail(`${t.name}: ${archiveName(version, t)} is missing`)
    return
  }
  const work = mkdtempSync(join(tmpdir(), `dbm-release-check-${t.name}-`))
  try {
    const stem = releaseStem(version, t)
    const listing =
      t.archive === 'zip' ? await $`unzip -Z1 ${archive}`.quiet().text() : await $`tar -tzf ${archive}`.quiet().text()
    const entries = listing
      .split('\n')
      .filter(Boolean)
      .map((e) => e.replace(/\/$/, ''))
      .sort()
    const expected = [stem, `${stem}/${t.exe}`, `${stem}/README.txt`]
    if (existsSync(join(repoRoot, 'LICENSE'))) expected.push(`${stem}/LICENSE`)
    if (t.os === 'linux')
      expected.push(
        `${stem}/systemd`,
        ...['dbm-agent.service', 'dbm-serve.service', 'dbm.sysusers.conf', 'dbm.tmpfiles.conf'].map(
          (f) => `${stem}/systemd/${f}`,
        ),
      )
    expected.sort()
    if (JSON.stringify(entries) === JSON.stringify(expected))
      ok(`${t.name}: ${archiveName(version, t)} holds ${entries.length} entries under ${stem}/`)
    else fail(`${t.name}: entries ${JSON.stringify(entries)}, expected ${JSON.stringify(expected)}`)

    if (t.archive === 'zip') await $`unzip -q ${archive}`.cwd(work).quiet()
    else await $`tar -xzf ${archive}`.cwd(work).quiet()
    const binary = join(work, stem, t.exe)
    const commit = /from commit (\S+)\.\r?\n/.exec(readFileSync(join(work, stem, 'README.txt'), 'utf8'))?.[1]
    if (commit) commits.set(t.name, commit)
    else fail(`${t.name}: README.txt names no commit`)
    const kind = await $`file -b ${binary}`.quiet().text()
    if (fileKinds[t.name]?.test(kind)) ok(`${t.name}: ${t.exe} is ${kind.trim().split(',').slice(0, 2).join(',')}`)
    else fail(`${t.name}: ${t.exe} is ${kind.trim()}`)

    if (t.os === 'darwin') {
      if (await machoSigned(binary)) ok(`${t.name}: dbm carries a code signature (not notarized)`)
      else fail(`${t.name}: dbm has no code signature: Apple silicon will not run it`)
    }

    const runner = runnerFor(t)
    if ('skip' in runner) {
      console.log(`skip ${t.name}: not run: ${runner.skip}`)
      return
    }
    if ('fail' in runner) {
      fail(`${t.name}: cannot run it here: ${runner.fail}`)
      return
    }
    const command = [...runner.prefix, binary]
    const started = performance.now()
    const out = await $`${command} version`.cwd(work).quiet().nothrow()
    const text = out.stdout.toString()
    const want = new RegExp(
      `^dbm ${version.replaceAll('.', '\\.')}\\ncommit: +${commit ?? '[0-9a-f]{40}(-dirty)?'}\\nbuilt: +\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ\\nbun: +${Bun.version.replaceAll('.', '\\.')}\\nplatform: +${t.name}\\n$`,
    )
    if (out.exitCode === 0 && want.test(text)) {
      ok(
        `${t.name}: ${runner.prefix.length ? `${runner.prefix.join(' ')} ` : ''}./dbm version (${Math.round(performance.now() - started)} ms):\n       ${text.trim().split('\n').join('\n       ')}`,
      )
    } else {
      fail(`${t.name}: dbm version exit ${out.exitCode}: ${text.trim()} ${out.stderr.toString().trim()}`)
      return
    }
    await checkServe(command, t, work)
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}

const sums = join(dir, 'SHA256SUMS')
if (!existsSync(sums)) {
  console.log(`FAIL ${sums} is missing: run bun run release first`)
  process.exit(1)
}
const listed = readFileSync(sums, 'utf8')
const lines = listed.split('\n').filter(Boolean)
if (lines.every((l) => /^[0-9a-f]{64} {2}dbm-\S+\.(tar\.gz|zip)$/.test(l)))
  ok(`SHA256SUMS: ${lines.length} lines of "<sha256>  <file>"`)
else fail(`SHA256SUMS: a line not of the form "<sha256>  <file>":\n${listed}`)
if (Bun.which('sha256sum')) {
  const verify = await $`sha256sum -c SHA256SUMS`.cwd(dir).quiet().nothrow()
  if (verify.exitCode === 0) ok(`sha256sum -c SHA256SUMS: ${verify.stdout.toString().trim().split('\n').join('; ')}`)
  else fail(`sha256sum -c SHA256SUMS: ${verify.stdout.toString().trim()} ${verify.stderr.toString().trim()}`)
} else {
  for (const line of lines) {
    const [hex, name] = line.split('  ') as [string, string]
    if ((await sha256(join(dir, name))) === hex)
      ok(`${name}: checksum matches (sha256sum not installed: computed here)`)
    else fail(`${name}: checksum does not match SHA256SUMS`)
  }
}

const chosen = values.target ? releaseTargets.filter((t) => values.target!.includes(t.name)) : releaseTargets
for (const t of chosen) await checkTarget(t)
const distinct = new Set(commits.values())
if (distinct.size === 1) ok(`every archive is of commit ${[...distinct][0]}`)
else if (distinct.size > 1) fail(`the archives name different commits: ${JSON.stringify(Object.fromEntries(commits))}`)

console.log(failures.length ? `\n${failures.length} check(s) failed` : '\nall checks passed')
process.exit(failures.length ? 1 : 0)
