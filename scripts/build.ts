// Builds the single dbm executable: `bun run build` for this machine (dist/dbm), `bun run build:all`
// for linux-x64, linux-arm64 and darwin-arm64 (dist/dbm-<target>). Release flags per DECISIONS.md, but
// for one: `--production` is spelled out as its parts without identifier minification.
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
import { $ } from 'bun'
import { headerLimits } from '../src/server/limits.ts'

const targets = ['bun-linux-x64', 'bun-linux-arm64', 'bun-darwin-arm64'] as const
const all = process.argv.includes('--all')

/** `--production` minus `--minify-identifiers` (see above); bytecode needs the ESM format to stay fast. */
const releaseFlags = ['--minify-syntax', '--minify-whitespace', '--define', 'process.env.NODE_ENV="production"', '--bytecode', '--format=esm']
/** What start-up asks of the build (see above). */
const startupFlags = ['--splitting', `--compile-exec-argv=--max-http-header-size=${headerLimits.parser}`]

async function build(outfile: string, target?: string) {
  const started = performance.now()
  // The diagnosis worker (src/server/doctor/worker.ts) is an entry point of its own: `new Worker(new URL(...))` finds it in the binary.
  const args = ['build', '--compile', ...releaseFlags, ...startupFlags, 'src/cli.ts', 'src/server/doctor/worker.ts', '--outfile', outfile]
  if (target) args.push(`--target=${target}`)
  await $`bun ${args}`.quiet()
  console.log(`built ${outfile}${target ? ` (${target})` : ''} in ${Math.round(performance.now() - started)} ms`)
}

await build('dist/dbm')
if (all) for (const target of targets) await build(`dist/dbm-${target.replace(/^bun-/, '')}`, target)
