// The version of dbm and the facts of its build that `dbm version` prints. The version is package.json's
// (bundled at build time); the commit and build date are stamped by scripts/build.ts with `--define`. Run
// from source nothing is stamped, and the output says so: the commit is the checkout's, read from git.
import { join } from 'node:path'
import pkg from '../package.json' with { type: 'json' }

// Replaced by scripts/build.ts (`--define DBM_BUILD_COMMIT="..."`); undeclared when run from source.
declare const DBM_BUILD_COMMIT: string | undefined
declare const DBM_BUILD_DATE: string | undefined

export const VERSION: string = pkg.version

export type BuildInfo = {
  version: string
  /** The commit built (`-dirty` when the tree had uncommitted changes), or the checkout's from source. */
  commit: string
  /** RFC 3339 UTC time of the build; undefined when run from source. */
  built: string | undefined
  bun: string
  platform: string
}

/** The checkout's commit, for a run from source: `<sha>[-dirty]`, or undefined without git. */
function sourceCommit(): string | undefined {
  const repo = join(import.meta.dir, '..')
  const git = (args: string[]) => {
    try {
      const out = Bun.spawnSync(['git', ...args], { cwd: repo, stdout: 'pipe', stderr: 'ignore' })
      return out.exitCode === 0 ? out.stdout.toString().trim() : undefined
    } catch {
      return undefined
    }
  }
  const sha = git(['rev-parse', 'HEAD'])
  if (!sha) return undefined
  const changes = git(['status', '--porcelain', '--untracked-files=no'])
  return changes ? `${sha}-dirty` : sha
}

export function buildInfo(): BuildInfo {
  const stamped = typeof DBM_BUILD_COMMIT === 'string'
  return {
    version: VERSION,
    commit: stamped ? DBM_BUILD_COMMIT : (sourceCommit() ?? 'unknown'),
    built: stamped && typeof DBM_BUILD_DATE === 'string' ? DBM_BUILD_DATE : undefined,
    bun: Bun.version,
    platform: `${process.platform}-${process.arch}`,
  }
}

/** What `dbm version` prints: `dbm <version>`, then one `key: value` line per fact. */
export function versionText(info: BuildInfo = buildInfo()): string {
  const source = info.built === undefined
  return [
    `dbm ${info.version}`,
    `commit:   ${info.commit}${source ? " (the checkout's: running from source)" : ''}`,
    `built:    ${info.built ?? 'source (not a build)'}`,
    `bun:      ${info.bun}`,
    `platform: ${info.platform}`,
    '',
  ].join('\n')
}
