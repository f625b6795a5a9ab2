// Settings that put the data or the database's upkeep at risk, from the database_stats gauges:
// fsync off (a crash or power loss can corrupt the cluster beyond repair: PostgreSQL's documentation
// says to turn it off only for data you can recreate), track_counts off (autovacuum decides from
// those counts, so it stops vacuuming and analyzing: PostgreSQL's documentation of autovacuum), both
// critical; autovacuum off (no table is vacuumed or analyzed any more except by the anti-wraparound
// vacuums PostgreSQL still forces: bloat and stale statistics; pganalyze and PgHero flag it), critical;
// full_page_writes off (PostgreSQL's documentation: a crash can then leave torn pages, unrecoverable or
// silent corruption, unless the storage writes pages atomically, e.g. ZFS), a warning since it can be
// deliberate; pg_stat_statements not installed in this database (no statement statistics for dbm,
// PgHero or pganalyze, which all require it), a warning. A setting the agent did not report is no
// finding. No numeric thresholds: each is on or off.
import type { FindingDraft, Rule } from '../../types.ts'

const defaults = {}

export const riskySettings: Rule<typeof defaults> = {
  id: 'pg_risky_settings',
  summary:
    "Settings that put the data or the database's upkeep at risk now (fsync off, track_counts off, autovacuum off, ...).",
  collectors: ['database_stats'],
  engine: 'postgres',
  category: 'configuration',
  thresholds: defaults,
  async check(ctx) {
    const s = (await ctx.databaseStats())?.payload
    if (!s) return []
    const findings: FindingDraft[] = []
    if (s.fsync_on === 0) {
      findings.push({
        severity: 'critical',
        object: 'fsync',
        title: 'fsync is off: a crash can corrupt the database',
        detail:
          'fsync = off: PostgreSQL does not wait for its writes to reach the disk, so an operating system crash or a power loss can leave the cluster corrupted beyond repair, committed data lost with it. ' +
          'It is meant only for throwaway data (a bulk load you can redo from scratch).',
        recommendation:
          'Turn fsync back on (a reload is enough). If the server crashed while it was off, restore from a backup rather than trust the data. For faster commits at no corruption risk, use synchronous_commit = off instead.',
        how_to_investigate: [
          "SELECT name, setting, source, sourcefile, sourceline FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit', 'full_page_writes');",
        ],
        how_to_fix: ['ALTER SYSTEM SET fsync = on; SELECT pg_reload_conf();'],
        metrics: { fsync_on: 0 },
      })
    }
    if (s.track_counts_on === 0) {
      findings.push({
        severity: 'critical',
        object: 'track_counts',
        title: 'track_counts is off: autovacuum cannot work',
        detail:
          'track_counts = off: PostgreSQL no longer counts inserted, updated and deleted rows, and autovacuum decides from those counts, so it stops vacuuming and analyzing tables (only anti-wraparound vacuums still run). ' +
          'Dead rows pile up, tables bloat and planner statistics go stale.',
        recommendation:
          'Turn track_counts back on (a reload is enough), then ANALYZE the database so the planner has fresh statistics.',
        how_to_investigate: [
          "SELECT name, setting, source, sourcefile, sourceline FROM pg_settings WHERE name IN ('track_counts', 'autovacuum');",
          'SELECT relname, n_dead_tup, last_autovacuum, last_autoanalyze FROM pg_stat_user_tables ORDER BY n_dead_tup DESC LIMIT 10;',
        ],
        how_to_fix: ['ALTER SYSTEM SET track_counts = on; SELECT pg_reload_conf();', 'ANALYZE;'],
        metrics: { track_counts_on: 0 },
      })
    }
    if (s.autovacuum_on === 0) {
      findings.push({
        severity: 'critical',
        object: 'autovacuum',
        title: 'autovacuum is off',
        detail:
          'autovacuum = off: no table is vacuumed or analyzed automatically any more, except the anti-wraparound vacuums PostgreSQL forces when a table gets too old. ' +
          'Dead rows pile up (bloat, slower scans), the visibility map goes stale (no index-only scans) and planner statistics age until plans go wrong.',
        recommendation:
          'Turn autovacuum back on (a reload is enough); to keep it off some big tables, set autovacuum_enabled = false on those tables only, and tune the cost limits rather than disabling it.',
        how_to_investigate: [
          "SELECT name, setting, source, sourcefile, sourceline FROM pg_settings WHERE name LIKE 'autovacuum%';",
          'SELECT relname, n_dead_tup, last_autovacuum, last_autoanalyze FROM pg_stat_user_tables ORDER BY n_dead_tup DESC LIMIT 10;',
        ],
        how_to_fix: [
          'ALTER SYSTEM SET autovacuum = on; SELECT pg_reload_conf();',
          'VACUUM (ANALYZE);   -- catch up on the tables left behind',
        ],
        metrics: { autovacuum_on: 0 },
      })
    }
    if (s.full_page_writes_on === 0) {
      findings.push({
        severity: 'warning',
        object: 'full_page_writes',
        title: 'full_page_writes is off: a crash can leave torn pages',
        detail:
          'full_page_writes = off: after a checkpoint PostgreSQL no longer writes a whole page to the WAL before its first change, so an operating system crash or power loss in the middle of a page write can leave a torn page that recovery cannot repair: unrecoverable or silent data corruption. ' +
          'It is only safe on storage that writes database pages atomically (ZFS, some battery-backed controllers).',
        recommendation:
          'Turn full_page_writes back on unless the storage guarantees atomic 8 kB page writes; to reduce WAL volume safely use wal_compression instead.',
        how_to_investigate: [
          "SELECT name, setting, source, sourcefile, sourceline FROM pg_settings WHERE name IN ('full_page_writes', 'wal_compression', 'fsync');",
        ],
        how_to_fix: ['ALTER SYSTEM SET full_page_writes = on; SELECT pg_reload_conf();'],
        metrics: { full_page_writes_on: 0 },
      })
    }
    if (s.pg_stat_statements_installed === 0) {
      findings.push({
        severity: 'warning',
        object: 'pg_stat_statements',
        title: 'pg_stat_statements is not installed in this database',
        detail:
          'The pg_stat_statements extension is not created in this database, so there are no statement statistics: dbm cannot show the top queries, their plans or the statements that spill to temp files. ' +
          'The extension is created per database, and its library must also be in shared_preload_libraries.',
        recommendation:
          'Create the extension in this database; if shared_preload_libraries does not list pg_stat_statements yet, add it (keeping the libraries listed) and restart.',
        how_to_investigate: [
          "SELECT extname, extversion FROM pg_extension WHERE extname = 'pg_stat_statements';",
          'SHOW shared_preload_libraries;',
        ],
        how_to_fix: [
          'CREATE EXTENSION IF NOT EXISTS pg_stat_statements;',
          "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements';   -- only if it lists nothing else yet (else keep those and append); restart afterwards",
        ],
        metrics: { pg_stat_statements_installed: 0 },
      })
    }
    return findings
  },
}
