// docs/check-postgres.md maps every single-server action of check_postgres 2.25 to the dbm rule or
// collector that covers it, or says why none does: each action below has exactly one row, each row
// either names rules and collectors that exist or says "none" with a reason, and the rules its notes name exist.
import { expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { rules } from '../../src/server/doctor/rules/index.ts'
import { collectorNames } from '../../src/shared/collectors.ts'

/** check_postgres 2.25's actions that run against one server (its action list, as its --help names them). */
const ACTIONS = [
  'archive_ready',
  'autovac_freeze',
  'backends',
  'bloat',
  'checkpoint',
  'cluster_id',
  'commitratio',
  'connection',
  'custom_query',
  'database_size',
  'dbstats',
  'disabled_triggers',
  'disk_space',
  'fsm_pages',
  'fsm_relations',
  'hitratio',
  'hot_standby_delay',
  'index_size',
  'indexes_size',
  'table_size',
  'relation_size',
  'total_relation_size',
  'last_analyze',
  'last_autoanalyze',
  'last_vacuum',
  'last_autovacuum',
  'listener',
  'locks',
  'lockwait',
  'logfile',
  'new_version_bc',
  'new_version_box',
  'new_version_cp',
  'new_version_pg',
  'new_version_tnm',
  'pgagent_jobs',
  'pgb_pool_cl_active',
  'pgb_pool_cl_waiting',
  'pgb_pool_maxwait',
  'pgb_pool_sv_active',
  'pgb_pool_sv_idle',
  'pgb_pool_sv_login',
  'pgb_pool_sv_tested',
  'pgb_pool_sv_used',
  'pgbouncer_backends',
  'pgbouncer_checksum',
  'pgbouncer_maxwait',
  'prepared_txns',
  'query_runtime',
  'query_time',
  'replicate_row',
  'replication_slots',
  'same_schema',
  'sequence',
  'settings_checksum',
  'slony_status',
  'timesync',
  'txn_idle',
  'txn_time',
  'txn_wraparound',
  'version',
  'wal_files',
]

const page = readFileSync(join(import.meta.dir, '../../docs/check-postgres.md'), 'utf8')
const rows = page
  .split('\n')
  .filter((line) => /^\| `[a-z_]+` \|/.test(line))
  .map((line) => line.split(' | ').map((cell) => cell.replace(/^\| |\s*\|$/g, '').trim()))
const ruleIds = new Set(rules.map((r) => r.id))
const collectors = new Set(collectorNames.filter((c) => c.engine === 'postgres').map((c) => c.name))
const backticked = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!)

test('every check_postgres action has one row, and only those actions do', () => {
  const actions = rows.map((r) => backticked(r[0]!)[0])
  expect([...actions].sort()).toEqual([...ACTIONS].sort())
})

test('each row names rules or collectors that exist, or says none with a reason', () => {
  for (const [action, dbm, notes] of rows) {
    const named = backticked(dbm!)
    if (dbm === 'none') {
      expect({ action, reason: notes!.length > 10 }).toEqual({ action, reason: true })
      continue
    }
    expect({ action, named: named.length > 0 && named.length === dbm!.split(', ').length }).toEqual({
      action,
      named: true,
    })
    for (const name of named)
      expect({ action, name, known: ruleIds.has(name) || collectors.has(name) }).toEqual({ action, name, known: true })
  }
})

/** Names in the notes that look like rule ids but are PostgreSQL's own (a directory). */
const CATALOG_NAMES = new Set(['pg_wal'])

test('every rule id named in the notes exists too', () => {
  for (const [action, , notes] of rows) {
    for (const name of backticked(notes!)) {
      if (/^(pg|ch)_[a-z_]+$/.test(name) && !CATALOG_NAMES.has(name))
        expect({ action, name, rule: ruleIds.has(name) }).toEqual({ action, name, rule: true })
    }
  }
})
