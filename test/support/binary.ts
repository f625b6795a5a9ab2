// The compiled binary the end-to-end tests drive: `dist/dbm` as `bun run build` makes it (the release
// flags of scripts/build.ts), built once per test process. `bun test` runs every file in one process, so
// however many files ask for it, the suite builds it once; a failed build fails each of them with its output.
// The test runner (scripts/test.ts) builds it once before its worker processes start and says so with
// DBM_TEST_BINARY_BUILT=1: then it is not built again, only checked for.
import { existsSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { repoRoot, runCommand } from './process.ts'

export const binaryPath = join(repoRoot, 'dist', 'dbm')

let build: Promise<string> | undefined

/** The path of dist/dbm, built by this test process: the first call builds it, later ones wait for that build. */
export function builtBinary(): Promise<string> {
  build ??= (async () => {
    if (process.env.DBM_TEST_BINARY_BUILT === '1') {
      if (!existsSync(binaryPath))
        throw new Error(`DBM_TEST_BINARY_BUILT is set but ${binaryPath} is missing (the runner's build failed)`)
      return binaryPath
    }
    const started = Date.now()
    const result = await runCommand(['bun', 'run', 'build'], { timeoutMs: 120_000 })
    if (result.exitCode !== 0)
      throw new Error(`bun run build failed (${result.exitCode}):\n${result.stdout}${result.stderr}`)
    // The binary under test is the one just built, not a stale one.
    if (statSync(binaryPath).mtimeMs < started - 1000) throw new Error(`bun run build did not rewrite ${binaryPath}`)
    return binaryPath
  })()
  return build
}
