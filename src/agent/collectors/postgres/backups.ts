// backups: the backup tool's own list of backups (pgBackRest `info --output=json`, WAL-G `backup-list
// --json --detail`), from the command the operator names in the database's config (backup_command). It
// runs at start and every backup_check_interval (default 10 minutes), in the background: a listing that
// reads a remote repository may take longer than a collector's deadline, so the cycle waits for it only
// briefly and a later cycle sends what it found. The command has its own deadline (backup_timeout) that
// kills it. The result is sent once, in the next batch after the command finished, and the server keeps
// the latest. A failed command is a status with `error` set (and no backups), not a collector failure:
// the doctor reads it. Without backup_command the collector does not run (we cannot know).
import type { BackupStatus } from '../../../shared/wire.ts'
import { parsePgBackRestInfo } from '../../backups/pgbackrest.ts'
import { type CommandLimits, defaultCommandLimits, runCommand } from '../../backups/run-command.ts'
import { parseWalgBackupList } from '../../backups/walg.ts'
import type { BackupConfig } from '../../config.ts'
import type { PostgresContext } from '../types.ts'
import { registerCollector } from '../registry.ts'

/** How long a cycle waits for a listing it started before leaving it to a later cycle. */
export const BACKUP_WAIT_MS = 3_000

/** A listing's life, kept under a `cache:` key: changed in place, never saved to disk. */
interface Job {
  startedAt: number
  running: Promise<void> | null
  /** What the last finished listing found, until a batch takes it. */
  result: BackupStatus | null
}

const KEY = 'cache:backups'

/** Runs the backup command once and reads its output: a BackupStatus whatever happens. */
export async function readBackups(
  config: BackupConfig,
  now: () => number = Date.now,
  limits?: Partial<CommandLimits>,
): Promise<BackupStatus> {
  const run = await runCommand(config.command, { ...defaultCommandLimits, timeoutMs: config.timeoutMs, ...limits })
  const checkedAt = now()
  if (run.stdout === null) return { tool: config.tool, checked_at: checkedAt, error: run.error, backups: [] }
  const parsed = config.tool === 'pgbackrest' ? parsePgBackRestInfo(run.stdout) : parseWalgBackupList(run.stdout)
  return { tool: config.tool, checked_at: checkedAt, error: parsed.error, backups: parsed.backups }
}

function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms)
    signal?.addEventListener('abort', () => {
      clearTimeout(timer)
      resolve()
    })
  })
}

export const backups = registerCollector<PostgresContext>({
  name: 'backups',
  engine: 'postgres',
  defaultEnabled: true,
  unconfigured: (config) => (config.backup === undefined ? 'no backup_command configured' : undefined),
  checkNotes: async ({ db, timeoutS }) => (db.backup ? [await backupNote(db.backup, timeoutS)] : []),

  async collect(ctx) {
    const config = ctx.backup
    if (!config) return {}
    let job = ctx.state.get(KEY) as Job | undefined
    if (!job) {
      job = { startedAt: 0, running: null, result: null }
      ctx.state.set(KEY, job)
    }
    const current = job
    if (
      current.running === null &&
      current.result === null &&
      (current.startedAt === 0 || ctx.now - current.startedAt >= config.intervalMs)
    ) {
      current.startedAt = ctx.now
      current.running = readBackups(config)
        .then((status) => {
          current.result = status
          if (status.error)
            ctx.log.warn('backup command gave no list', {
              database: ctx.name,
              collector: 'backups',
              cause: status.error,
            })
        })
        .catch((e) => {
          // readBackups never rejects; this keeps an unforeseen fault from becoming an unhandled rejection.
          current.result = {
            tool: config.tool,
            checked_at: Date.now(),
            error: `backup check failed: ${(e as Error).message}`.slice(0, 1_000),
            backups: [],
          }
        })
        .finally(() => {
          current.running = null
        })
    }
    if (current.running !== null) await Promise.race([current.running, delay(BACKUP_WAIT_MS)])
    const result = current.result
    if (result === null) return {}
    current.result = null
    return { backups: result }
  },
})

/** The backup command run once, as the collector will: how many backups it lists and the newest, or why none. */
async function backupNote(config: BackupConfig, timeoutS: number): Promise<string> {
  // Within the check's own deadline, which covers the whole database line.
  const status = await readBackups(config, Date.now, { timeoutMs: Math.min(config.timeoutMs, timeoutS * 500) })
  const newest = status.backups[0]
  if (status.error && !newest) return `backups: ${status.error}`
  const when = newest?.finished_at ?? newest?.started_at
  const listed = newest
    ? `${status.backups.length} listed, the newest ${newest.label} (${newest.type}${when ? `, ${new Date(when).toISOString()}` : ''})`
    : 'none listed'
  return `backups (${config.tool}): ${listed}${status.error ? `; ${status.error}` : ''}`
}
