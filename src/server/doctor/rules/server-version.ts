// The database server's version changed in the last hours (Altinity's VersionChanged), from the version
// changes ingest derives (events/events.ts compares each batch's engine_version with the database's):
// one finding naming the version before the first change in the window and the one now, with what to
// check after it. A new major version (PostgreSQL's first number; ClickHouse's year.month release) or a
// downgrade is a warning: extensions, statistics and defaults change with it; a minor update is info.
// A version changed and changed back within the window is no finding.
import type { ServerChange } from '../../store/events/server-changes.ts'
import type { Rule } from '../types.ts'

const defaults = {
  /** How long after the change the finding stays. */
  keep_hours: 24,
}

const HOUR = 3_600_000
const iso = (ms: number) => new Date(ms).toISOString()

/** The version before a change: its detail is `old → new` with `new` its object (events/events.ts). */
export function versionBefore(change: ServerChange): string | null {
  const detail = change.detail ?? ''
  const suffix = ` → ${change.object}`
  if (detail.endsWith(suffix)) return detail.slice(0, -suffix.length)
  const i = detail.indexOf(' → ')
  return i >= 0 ? detail.slice(0, i) : null
}

/** The numbers a version starts with: `17.2 (Debian ...)` → [17, 2]; `26.1.2.1` → [26, 1, 2, 1]. */
const numbers = (version: string) =>
  (/^\s*v?(\d+(?:\.\d+)*)/.exec(version)?.[1] ?? '').split('.').filter(Boolean).map(Number)

/** The release line: PostgreSQL's major (9.6 before 10), ClickHouse's year.month. */
export function releaseLine(engine: string, version: string): string {
  const n = numbers(version)
  if (n.length === 0) return version
  if (engine === 'clickhouse' || (n[0]! < 10 && n.length > 1)) return n.slice(0, 2).join('.')
  return String(n[0])
}

/** Negative when a is older than b (by their leading numbers), 0 when equal or unknown. */
function compareVersions(a: string, b: string): number {
  const x = numbers(a)
  const y = numbers(b)
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const d = (x[i] ?? 0) - (y[i] ?? 0)
    if (d !== 0) return d
  }
  return 0
}

export const serverVersionChanged: Rule<typeof defaults> = {
  id: 'server_version_changed',
  summary:
    "The server's version changed in the last hours (a new major release or a downgrade is a warning), with what to check after it.",
  collectors: [],
  engine: 'any',
  category: 'configuration',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(serverVersionChanged)
    const changes = await ctx.store.serverChanges.serverChanges(
      ctx.db.id,
      ['version_change'],
      { since: ctx.now - t.keep_hours * HOUR, until: ctx.now + 1 },
      100,
    )
    if (changes.length === 0) return []
    const newest = changes[0]!
    const oldest = changes[changes.length - 1]!
    const from = versionBefore(oldest)
    const to = newest.object
    if (from === null || from === to) return []
    const postgres = ctx.db.engine === 'postgres'
    const newLine = releaseLine(ctx.db.engine, from) !== releaseLine(ctx.db.engine, to)
    const downgrade = compareVersions(to, from) < 0
    const fromMajor = Number(releaseLine(ctx.db.engine, from))
    const toMajor = Number(releaseLine(ctx.db.engine, to))
    const what = downgrade ? 'downgraded' : newLine ? 'upgraded to a new major version' : 'updated'
    const checks = postgres
      ? [
          'extensions keep their old version until ALTER EXTENSION ... UPDATE (the first query below lists them)',
          newLine
            ? "pg_stat_statements' statement ids (queryid) change with a major version, so statement statistics and dbm's statement history start over"
            : null,
          newLine && toMajor < 18
            ? 'pg_upgrade does not carry planner statistics before PostgreSQL 18: ANALYZE every database (vacuumdb --all --analyze-in-stages) if it has not run'
            : null,
          newLine || downgrade
            ? 'the release notes\' "Migration" incompatibilities'
            : "the minor release's notes (some ask to REINDEX some indexes)",
        ]
      : [
          'the changelog\'s "Backward Incompatible Change" entries of every release from the old version to the new one',
          "settings whose defaults changed (the compatibility setting restores an older release's defaults)",
          'system.warnings, which the server fills with what it finds wrong at start',
        ]
    return [
      {
        severity: newLine || downgrade ? 'warning' : 'info',
        object: to,
        title: `${postgres ? 'PostgreSQL' : 'ClickHouse'} ${what}: ${from} → ${to}`,
        detail:
          `The server reported version ${to} from ${iso(newest.ts)} on; before ${iso(oldest.ts)} it was ${from}` +
          `${changes.length > 1 ? ` (${changes.length} version changes in the last ${t.keep_hours} h)` : ''}. ` +
          `To check after it: ${checks.filter(Boolean).join('; ')}.`,
        recommendation: postgres
          ? `Update the extensions that have a newer version installed${newLine && toMajor < 18 && fromMajor < toMajor ? ', run ANALYZE in every database' : ''}, and compare the slowest statements with the days before the change.`
          : 'Read the backward-incompatible changes between the two versions, check system.warnings, and compare query times and errors with the days before the change.',
        how_to_investigate: postgres
          ? [
              'SELECT name, installed_version, default_version FROM pg_available_extensions WHERE installed_version IS NOT NULL AND installed_version <> default_version;',
              'SELECT version();',
              'SELECT stats_reset FROM pg_stat_statements_info;   -- when the statement statistics started over',
            ]
          : [
              'SELECT version(), uptime();',
              'SELECT message FROM system.warnings;',
              'SELECT name, value FROM system.settings WHERE changed;   -- the settings changed from their defaults',
            ],
        how_to_fix:
          postgres && newLine && toMajor < 18 && fromMajor < toMajor
            ? ['ANALYZE;   -- in every database; or on the host: vacuumdb --all --analyze-in-stages']
            : [],
        metrics: { version_before: from, version_now: to, changed_at: newest.ts, version_changes: changes.length },
      },
    ]
  },
}
