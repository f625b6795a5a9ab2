// Builds the release files into release/: for each target an archive dbm-<version>-<os>-<arch>.tar.gz
// (.zip for Windows) holding one folder of that name with the binary, README.txt, LICENSE when the
// repository has one and, for Linux, the systemd units of deploy/systemd; then SHA256SUMS over the
// archives in the format `sha256sum -c` reads.
//
//   bun run release                              every target
//   bun scripts/release.ts --target linux-arm64  only these targets (repeatable)
//   bun scripts/release.ts --out DIR             another directory (default: release/)
//
// The binaries are compiled by scripts/build.ts's `compile`, so with the flags of `bun run build` and
// stamped with the same commit and build date across targets. The archives are reproducible given the
// binaries: entries sorted, owner 0:0, every mtime the build date, gzip without a name or time stamp.
// `bun run release:check` (scripts/release-check.ts) verifies and runs what this wrote.
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { $ } from 'bun'
import pkg from '../package.json' with { type: 'json' }
import { type BuildStamp, buildStamp, compile } from './build.ts'

const repoRoot = join(import.meta.dir, '..')

export type ReleaseTarget = {
  name: string
  bunTarget: string
  os: 'linux' | 'darwin' | 'windows'
  exe: string
  archive: 'tar.gz' | 'zip'
}

const target = (os: ReleaseTarget['os'], arch: 'x64' | 'arm64'): ReleaseTarget => ({
  name: `${os}-${arch}`,
  bunTarget: `bun-${os}-${arch}`,
  os,
  exe: os === 'windows' ? 'dbm.exe' : 'dbm',
  archive: os === 'windows' ? 'zip' : 'tar.gz',
})

export const releaseTargets: readonly ReleaseTarget[] = [
  target('linux', 'x64'),
  target('linux', 'arm64'),
  target('darwin', 'arm64'),
  target('darwin', 'x64'),
  target('windows', 'x64'),
]

/** The release target of the machine this runs on (undefined on one dbm has no release for). */
export function hostTarget(): ReleaseTarget | undefined {
  const os = process.platform === 'win32' ? 'windows' : process.platform
  return releaseTargets.find((t) => t.name === `${os}-${process.arch}`)
}

/** `dbm-<version>-<os>-<arch>`: the archive's name without extension, and the folder inside it. */
export const releaseStem = (version: string, t: ReleaseTarget) => `dbm-${version}-${t.name}`
export const archiveName = (version: string, t: ReleaseTarget) => `${releaseStem(version, t)}.${t.archive}`

/** The short README.txt that goes into each archive. */
export function archiveReadme(version: string, t: ReleaseTarget, stamp: BuildStamp): string {
  const run = t.os === 'windows' ? 'dbm.exe' : './dbm'
  const lines = [
    `dbm ${version} for ${t.name}`,
    `Built ${stamp.date} from commit ${stamp.commit}.`,
    '',
    'dbm is a self-hosted monitoring service for PostgreSQL and ClickHouse, in one executable: it',
    'needs nothing else installed and fetches nothing from the internet at run time.',
    '',
    `  ${run} version                   what this binary is`,
    `  ${run} serve                     API and dashboard on http://localhost:8080 (data in ./dbm-data)`,
    `  ${run} agent --config FILE       collectors pushing to a server`,
    `  ${run} local postgres://...      one database on this machine, dashboard and agent in one process`,
    `  ${run} help                      every command; "${run} <command> --help" for its flags`,
    '',
  ]
  if (t.os === 'linux') {
    lines.push(
      'Install: sudo install -m 0755 dbm /usr/local/bin/dbm',
      'systemd/ holds units that run "dbm serve" and "dbm agent" as a dbm system user; the project',
      'docs/deployment.md (section "systemd") says how to install them.',
      '',
    )
  } else if (t.os === 'darwin') {
    lines.push(
      'Install: sudo install -m 0755 dbm /usr/local/bin/dbm',
      'macOS marks downloaded files as quarantined; the binary is not notarized, so clear the mark once:',
      '  xattr -d com.apple.quarantine /usr/local/bin/dbm',
      '',
    )
  } else {
    lines.push('The binary is not signed: Windows SmartScreen may ask before the first run.', '')
  }
  lines.push(
    'An upgrade replaces the one file; the data directory stays. Everything else: the project README and docs/.',
    '',
  )
  return lines.join(t.os === 'windows' ? '\r\n' : '\n')
}

/** Puts `binary` with its companions into outDir/<archive name>; returns the archive's path. */
export async function packageTarget(options: {
  binary: string
  target: ReleaseTarget
  version: string
  stamp: BuildStamp
  outDir: string
  /** gzip's level (tar.gz only): 6 by default; -9 saves 0.3 % of the size for 40 % more time. */
  gzipLevel?: number
}): Promise<string> {
  const { binary, target: t, version, stamp, outDir, gzipLevel = 6 } = options
  const stem = releaseStem(version, t)
  const staging = join(outDir, `.staging-${t.name}`)
  rmSync(staging, { recursive: true, force: true })
  const folder = join(staging, stem)
  mkdirSync(folder, { recursive: true })
  cpSync(binary, join(folder, t.exe))
  chmodSync(join(folder, t.exe), 0o755)
  writeFileSync(join(folder, 'README.txt'), archiveReadme(version, t, stamp), { mode: 0o644 })
  if (existsSync(join(repoRoot, 'LICENSE'))) cpSync(join(repoRoot, 'LICENSE'), join(folder, 'LICENSE'))
  if (t.os === 'linux') cpSync(join(repoRoot, 'deploy', 'systemd'), join(folder, 'systemd'), { recursive: true })

  // Same bytes for the same inputs: every entry's mtime is the build date, modes fixed, entries sorted.
  const when = new Date(stamp.date)
  for (const entry of [
    folder,
    ...readdirSync(folder, { recursive: true, encoding: 'utf8' }).map((e) => join(folder, e)),
  ]) {
    if (statSync(entry).isDirectory()) chmodSync(entry, 0o755)
    else if (!entry.endsWith(`/${t.exe}`)) chmodSync(entry, 0o644)
  }
  for (const entry of [
    ...readdirSync(folder, { recursive: true, encoding: 'utf8' }).map((e) => join(folder, e)),
    folder,
  ])
    utimesSync(entry, when, when)

  const archive = join(outDir, archiveName(version, t))
  rmSync(archive, { force: true })
  if (t.archive === 'zip') {
    // -X: no extra attributes (uid/gid, extended times); TZ=UTC: the DOS times are the build date in UTC.
    const files = [stem, ...readdirSync(folder, { recursive: true, encoding: 'utf8' }).map((e) => join(stem, e))].sort()
    await $`zip -X -6 -q ${archive} ${files}`
      .cwd(staging)
      .env({ ...process.env, TZ: 'UTC' })
      .quiet()
  } else {
    await $`tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=${stamp.date} --format=gnu -cf - ${stem} | gzip -n -${gzipLevel} > ${archive}`
      .cwd(staging)
      .quiet()
  }
  rmSync(staging, { recursive: true, force: true })
  return archive
}

/** The SHA-256 of a file, hex. */
export async function sha256(path: string): Promise<string> {
  const hasher = new Bun.CryptoHasher('sha256')
  for await (const chunk of Bun.file(path).stream()) hasher.update(chunk)
  return hasher.digest('hex')
}

/** Writes outDir/SHA256SUMS over every archive there: `<hex>  <name>` lines, sorted by name (`sha256sum -c` format). */
export async function writeChecksums(outDir: string): Promise<string> {
  const archives = readdirSync(outDir)
    .filter((n) => /^dbm-.+\.(tar\.gz|zip)$/.test(n))
    .sort()
  const lines = await Promise.all(archives.map(async (name) => `${await sha256(join(outDir, name))}  ${name}\n`))
  const path = join(outDir, 'SHA256SUMS')
  writeFileSync(path, lines.join(''))
  return path
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    args: Bun.argv.slice(2),
    options: { target: { type: 'string', multiple: true }, out: { type: 'string' } },
  })
  const unknown = (values.target ?? []).filter((n) => !releaseTargets.some((t) => t.name === n))
  if (unknown.length) {
    console.error(
      `--target: no such target ${unknown.join(', ')} (targets: ${releaseTargets.map((t) => t.name).join(', ')})`,
    )
    return 2
  }
  const chosen = values.target ? releaseTargets.filter((t) => values.target!.includes(t.name)) : releaseTargets
  const outDir = values.out ?? join(repoRoot, 'release')
  const version = pkg.version
  if (!/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/.test(version)) {
    console.error(`package.json version ${version} is not semver`)
    return 1
  }

  // Only what an earlier run wrote goes; anything else in the directory is left alone.
  mkdirSync(outDir, { recursive: true })
  for (const name of readdirSync(outDir)) {
    if (/^dbm-.+\.(tar\.gz|zip)$/.test(name) || name === 'SHA256SUMS' || name.startsWith('.staging-'))
      rmSync(join(outDir, name), { recursive: true, force: true })
  }

  const stamp = await buildStamp()
  if (stamp.commit.endsWith('-dirty'))
    console.warn(`warning: uncommitted changes; the binaries say commit ${stamp.commit}`)
  if (!existsSync(join(repoRoot, 'LICENSE')))
    console.warn('warning: the repository has no LICENSE file; the archives ship without one')

  const summary: string[] = []
  for (const t of chosen) {
    const binary = join(outDir, `.staging-bin-${t.name}`, t.exe)
    mkdirSync(join(outDir, `.staging-bin-${t.name}`), { recursive: true })
    let ms: number
    try {
      ms = await compile(binary, stamp, t.bunTarget)
    } catch (e) {
      const err = e as { stderr?: Buffer; message: string }
      console.error(`${t.name}: bun build failed: ${err.stderr?.toString().trim() || err.message}`)
      return 1
    }
    const archive = await packageTarget({ binary, target: t, version, stamp, outDir })
    summary.push(
      `${archiveName(version, t).padEnd(34)} ${(statSync(archive).size / 1e6).toFixed(1).padStart(6)} MB  (binary ${(statSync(binary).size / 1e6).toFixed(1)} MB, compiled in ${(ms / 1000).toFixed(1)} s)`,
    )
    rmSync(join(outDir, `.staging-bin-${t.name}`), { recursive: true, force: true })
  }
  await writeChecksums(outDir)
  console.log(
    `\nrelease ${version} (commit ${stamp.commit}, built ${stamp.date}) in ${outDir}:\n${summary.join('\n')}\nSHA256SUMS`,
  )
  return 0
}

if (import.meta.main) process.exit(await main())
