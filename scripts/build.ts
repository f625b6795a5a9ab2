// Builds the single dbm executable: `bun run build` for this machine (dist/dbm), `bun run build:all`
// for linux-x64, linux-arm64 and darwin-arm64 (dist/dbm-<target>). Release flags per DECISIONS.md, but
// for one: `--production` is spelled out as its parts without identifier minification. scripts/release.ts
// builds the release archives with the same `compile` and flags.
//
// Stamp: every build defines DBM_BUILD_COMMIT (HEAD, `-dirty` when tracked files have uncommitted changes)
// and DBM_BUILD_DATE (UTC, to the second; SOURCE_DATE_EPOCH when set), which `dbm version` prints
// (src/version.ts); the version itself is package.json's.
//
// Why: `--production` means `--minify` (whitespace, syntax and identifiers) plus NODE_ENV=production.
// Renamed identifiers break Elysia, which compares class names at run time: its generated validator runs
// TypeBox's Decode in `try {...} catch (e) { if (e.constructor.name === 'TransformDecodeError') throw ... }`
// and swallows any other error. Minified, TypeBox's class is called something else, so every check that
// lives in a Decode (the minimum of `t.Integer` query parameters and body fields given as strings) was
// silently skipped: `?limit=-1` reached the store as the string "-1" (SQLite: no limit at all; PostgreSQL:
// a 500), `?bucket=-60` was a 200 and a body's `"port": "0"` was stored as a string. Bun 1.4's
// `--keep-names` does not restore the names (it keeps the minified one). Measured against the full
// `--production` build: the binary is 0.5 % larger (117.1 -> 117.7 MB), the dashboard's JavaScript 213 ->
// 274 KB (73 -> 82 KB gzipped), startup and request throughput unchanged within noise. The compiled
// binary runs the API conformance tests (test/api/conformance.test.ts) so that a build difference
// shows up as a failing test.
//
// Start-up (issue 13; bench/startup.ts): `--splitting` puts what each command loads into chunks of its
// own, so that `dbm serve` does not load the agent, nodemailer or YAML, nor `dbm version` the server:
// the binary's JavaScript is 1.8 MB, and with one chunk the runtime loaded all of it before the first line
// ran (about 45 ms; 25 ms split). `--max-http-header-size` is passed to the runtime (`--compile-exec-argv`)
// so that the app need not load node:http (about 20 ms) to raise Bun's header limit (app.ts).
import { join, relative } from 'node:path'
import { $ } from 'bun'
import { headerLimits } from '../src/server/limits.ts'

/** The repository: builds run there whatever the caller's working directory. */
const repoRoot = join(import.meta.dir, '..')

export const crossTargets = ['bun-linux-x64', 'bun-linux-arm64', 'bun-darwin-arm64'] as const

/** `--production` minus `--minify-identifiers` (see above); bytecode needs the ESM format to stay fast. */
export const releaseFlags = [
  '--minify-syntax',
  '--minify-whitespace',
  '--define',
  'process.env.NODE_ENV="production"',
  '--bytecode',
  '--format=esm',
]
/** What start-up asks of the build (see above). */
export const startupFlags = ['--splitting', `--compile-exec-argv=--max-http-header-size=${headerLimits.parser}`]

export type BuildStamp = { commit: string; date: string }

/** The commit and date a build is stamped with (see above). */
export async function buildStamp(env: Record<string, string | undefined> = process.env): Promise<BuildStamp> {
  const sha = (await $`git rev-parse HEAD`.cwd(repoRoot).quiet().nothrow().text()).trim()
  const dirty =
    (await $`git status --porcelain --untracked-files=no`.cwd(repoRoot).quiet().nothrow().text()).trim() !== ''
  const epoch = env.SOURCE_DATE_EPOCH
  const when = epoch && /^\d+$/.test(epoch) ? new Date(Number(epoch) * 1000) : new Date()
  return {
    commit: sha ? `${sha}${dirty ? '-dirty' : ''}` : 'unknown',
    date: when.toISOString().replace(/\.\d{3}Z$/, 'Z'),
  }
}

/** Compiles src/cli.ts into `outfile` for `target` (a `bun-<os>-<arch>` name; this machine when absent). */
export async function compile(outfile: string, stamp: BuildStamp, target?: string): Promise<number> {
  const started = performance.now()
  const defines = [
    '--define',
    `DBM_BUILD_COMMIT=${JSON.stringify(stamp.commit)}`,
    '--define',
    `DBM_BUILD_DATE=${JSON.stringify(stamp.date)}`,
  ]
  // The diagnosis worker (src/server/doctor/worker.ts) and the ingest writer (src/server/ingest-writer/worker.ts)
  // are entry points of their own: `new Worker(new URL(...))` finds them in the binary.
  const args = [
    'build',
    '--compile',
    ...releaseFlags,
    ...startupFlags,
    ...defines,
    'src/cli.ts',
    'src/server/doctor/worker.ts',
    'src/server/ingest-writer/worker.ts',
    '--outfile',
    outfile,
  ]
  if (target) args.push(`--target=${target}`)
  await $`bun ${args}`.cwd(repoRoot).quiet()
  const ms = Math.round(performance.now() - started)
  console.log(`built ${relative(repoRoot, outfile)}${target ? ` (${target})` : ''} in ${ms} ms`)
  return ms
}

if (import.meta.main) {
  const stamp = await buildStamp()
  await compile(join(repoRoot, 'dist', 'dbm'), stamp)
  if (process.argv.includes('--all'))
    for (const target of crossTargets)
      await compile(join(repoRoot, 'dist', `dbm-${target.replace(/^bun-/, '')}`), stamp, target)
}
