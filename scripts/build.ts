// Builds the single dbm executable: `bun run build` for this machine (dist/dbm), `bun run build:all`
// for linux-x64, linux-arm64 and darwin-arm64 (dist/dbm-<target>). Release flags per DECISIONS.md.
import { $ } from 'bun'

const targets = ['bun-linux-x64', 'bun-linux-arm64', 'bun-darwin-arm64'] as const
const all = process.argv.includes('--all')

async function build(outfile: string, target?: string) {
  const started = performance.now()
  const args = ['build', '--compile', '--production', '--bytecode', '--format=esm', 'src/cli.ts', '--outfile', outfile]
  if (target) args.push(`--target=${target}`)
  await $`bun ${args}`.quiet()
  console.log(`built ${outfile}${target ? ` (${target})` : ''} in ${Math.round(performance.now() - started)} ms`)
}

await build('dist/dbm')
if (all) for (const target of targets) await build(`dist/dbm-${target.replace(/^bun-/, '')}`, target)
