// The doctor's commands stay the statements each rule meant whatever the monitored database calls its
// objects or runs: every rule of both engines (taken from the rule registries, so a new rule is covered
// without a change here) is made to fire on stored telemetry whose names and texts are harmless, then
// again with names and texts carrying newlines, CR, comment markers, quotes, backslashes, semicolons,
// dollar quotes, unicode separators and bidirectional marks, NUL (ClickHouse), keywords and 10,000
// characters. Each command is parsed by the engine's own parser (PostgreSQL's through libpg-query;
// ClickHouse's through EXPLAIN AST on the chdb engine, after a strict lexer split it on top-level `;`)
// and must be exactly as many statements of the same kinds, with the same tokens around the names, as
// the harmless run's; the hostile text appears only inside string constants, identifiers and comments.
// Commands are parsed, never run.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { loadModule, parseSync, scanSync } from 'libpg-query'
import postgres from 'postgres'
import { diagnose } from '../../src/server/doctor/index.ts'
import { clickhouseRules } from '../../src/server/doctor/rules/clickhouse/index.ts'
import { rules } from '../../src/server/doctor/rules/index.ts'
import { postgresRules } from '../../src/server/doctor/rules/postgres/index.ts'
import { chIdent, chString, chTable, pgIdent, pgIndexDefinition, pgString } from '../../src/server/doctor/sql-text.ts'
import type { Finding } from '../../src/server/doctor/types.ts'
import type { HostStatus, IngestBatch } from '../../src/shared/wire.ts'
import { createLogger } from '../../src/shared/log.ts'
import { chBatch, pgBatch } from '../support/batches.ts'
import { logEntry, logSection } from '../support/log-events.ts'
import { type ClickHouseRig, startClickHouse } from '../support/clickhouse.ts'
import { sharedPostgres } from '../support/postgres.ts'
import { type Account, type TestServer, agentAccount, startTestServer } from '../support/server.ts'
import { HIDDEN_CHARACTERS } from '../../src/shared/invisible.ts'

/** Every hostile value carries this, so the checks can find where it went. */
const MARK = 'zqx'

/** Hostile payloads by name; each monitored text of a run is `<role><payload>`. */
const PAYLOADS: Record<string, string> = {
  newline: `${MARK}\nDROP TABLE public.victim; --`,
  cr: `${MARK}\rDROP TABLE public.victim; --`,
  comment_end: `${MARK} */ DROP TABLE public.victim; /* `,
  statement_in_comment: `SELECT v FROM big ORDER BY v || id /*\nDROP TABLE public.victim; --*/ ${MARK}`,
  single_quote: `${MARK}'; DROP TABLE public.victim; --`,
  double_quote: `${MARK}"; DROP TABLE public.victim; --`,
  backquote: `${MARK}\`; DROP TABLE default.victim; --`,
  backslash_quote: `${MARK}\\'; DROP TABLE default.victim; --`,
  backslash_end: `${MARK}\\`,
  dollar: `${MARK}$$; DROP TABLE public.victim; $$`,
  unicode: `${MARK}\u2028DROP TABLE victim;\u2029\u0085\u202e\u200f\u061c ünïcødé 表 🐘 \u000b\u000c \u{e0044}\u{e0052}\u{e004f}\u{e0050}\u3164\ufff9x\ufffb\u034f\ufe0f\u{e0100}`,
  long: `${MARK}${"x'\n;--*/\\".repeat(1000)}`,
}

/** Payloads only ClickHouse can hold (PostgreSQL names and texts have no NUL). */
const CLICKHOUSE_PAYLOADS: Record<string, string> = {
  nul: `${MARK}\u0000'; DROP TABLE default.victim; --`,
}

/** A run: how each monitored text is made, and the schema and role names. */
interface Variant {
  name: string
  text(role: string, max?: number): string
  schema: string
  user: string
}

const harmless: Variant = { name: 'harmless', text: (role) => role, schema: 'app', user: 'app_user' }

function hostile(name: string, payload: string): Variant {
  const text = (role: string, max = Infinity) => `${role}${payload}`.slice(0, max)
  return { name, text, schema: text('s'), user: text('u') }
}

/** Names that are keywords: bare they would fail to parse or name something else (`current_user`). */
const keywords: Variant = { name: 'keywords', text: (role) => `${role}_select`, schema: 'user', user: 'current_user' }
const clickhouseKeywords: Variant = {
  name: 'keywords',
  text: (role) => `${role}_select`,
  schema: 'select',
  user: 'default',
}

/** PostgreSQL's quote_ident(), as pg_get_indexdef() writes names: never U&"...". */
const quoteIdent = (s: string) => (pgIdent(s) === s ? s : `"${s.replaceAll('"', '""')}"`)

const MINUTE = 60_000
const HOUR = 60 * MINUTE
const GB = 1024 ** 3

/** The PostgreSQL telemetry that makes every PostgreSQL rule fire, with the variant's names. */
function postgresBatches(v: Variant, now: number): IngestBatch[] {
  const t = (role: string) => v.text(role)
  const s = v.schema
  const table = (role: string, extra: Record<string, unknown>) => ({
    schema_name: s,
    table_name: t(role),
    seq_scan: 10,
    seq_tup_read: 10,
    idx_scan: 10,
    idx_tup_fetch: 10,
    n_tup_ins: 0,
    n_tup_upd: 0,
    n_tup_del: 0,
    n_tup_hot_upd: 0,
    n_live_tup: 1000,
    n_dead_tup: 0,
    last_vacuum: null,
    last_autovacuum: null,
    last_analyze: null,
    last_autoanalyze: null,
    table_size_bytes: 8 * 1024 * 1024,
    index_size_bytes: 0,
    has_primary_key: true,
    autovacuum_enabled: true,
    delta: null,
    ...extra,
  })
  const seqDelta = {
    seq_scan: 1000,
    seq_tup_read: 50_000_000,
    idx_scan: 0,
    idx_tup_fetch: 0,
    n_tup_ins: 0,
    n_tup_upd: 0,
    n_tup_del: 0,
    n_tup_hot_upd: 0,
  }
  const index = (name: string, tableRole: string, columns: string[], extra: Record<string, unknown> = {}) => {
    const unique = extra.is_unique === true
    return {
      schema_name: s,
      table_name: t(tableRole),
      index_name: name,
      idx_scan: 5,
      idx_tup_read: 5,
      idx_tup_fetch: 5,
      size_bytes: 2 * 1024 * 1024,
      index_def: `CREATE ${unique ? 'UNIQUE ' : ''}INDEX ${quoteIdent(name)} ON ${quoteIdent(s)}.${quoteIdent(t(tableRole))} USING btree (${columns.map((c) => quoteIdent(t(c))).join(', ')})`,
      is_unique: false,
      is_primary: false,
      is_valid: true,
      delta: null,
      ...extra,
    }
  }
  const active = (pid: number, state: string, seconds: number, blocking: number[] = []) => ({
    pid,
    query_text: t(`query${pid}`),
    state,
    wait_event_type: blocking.length > 0 ? 'Lock' : null,
    wait_event: blocking.length > 0 ? 'relation' : null,
    duration_ms: seconds * 1000,
    blocking_pids: blocking,
    user: v.user,
    application_name: t('app'),
    client_addr: t('addr'),
    database: t('db'),
    backend_type: 'client backend',
    xact_start: now - seconds * 1000,
    backend_start: now - seconds * 1000 - 60_000,
    query_start: now - seconds * 1000,
  })
  const lock = (pid: number, granted: boolean) => ({
    pid,
    lock_type: 'relation',
    mode: 'AccessExclusiveLock',
    relation_name: t('locked'),
    granted,
    blocked_by_pid: null,
    duration_ms: 60_000,
    query_text: t(`query${pid}`),
  })
  const statement = (role: string, calls: number, totalMs: number, tempBlocks: number) => ({
    query_hash: t(role).slice(0, 64),
    query_text: t(`text_${role}`),
    calls,
    total_time_ms: totalMs,
    rows: calls,
    shared_blks_hit: 10,
    shared_blks_read: 10,
    temp_blks_written: tempBlocks,
  })
  const seqScan = (relation: string, filter: string | null) => ({
    'Node Type': 'Seq Scan',
    'Relation Name': relation,
    ...(filter ? { Filter: filter } : {}),
    'Plan Rows': 10,
  })
  const plan = (hash: string, ts: number, cost: number, node: Record<string, unknown>) => ({
    query_hash: t('stmt1').slice(0, 64),
    ts,
    plan_json: { Plan: node },
    plan_hash: t(hash).slice(0, 64),
    total_cost: cost,
    actual_time_ms: null,
    seq_scans: node['Node Type'] === 'Seq Scan' ? 1 : 0,
    index_scans: node['Node Type'] === 'Seq Scan' ? 0 : 1,
    rows_estimated: 10,
    rows_actual: null,
    source: 'sampled' as const,
  })
  const sequence = (role: string, used: number) => ({
    schema_name: s,
    sequence_name: t(role),
    data_type: t('integer'),
    last_value: Math.round(2_147_483_647 * used),
    max_value: 2_147_483_647,
    increment_by: 1,
    used_ratio: used,
    owned_by: { schema_name: s, table_name: t(`${role}_owner`), column_name: t(`${role}_id`), column_type: 'integer' },
  })
  const foreignKey = (role: string) => ({
    schema_name: s,
    table_name: t(`${role}_child`),
    constraint_name: t(`${role}_fkey`),
    columns: [t(`${role}_parent_id`)],
    referenced_table: t(`${role}_parent`),
    table_size_bytes: 20 * 1024 * 1024,
    n_live_tup: 20_000,
  })
  const replica = (role: string) => ({
    application_name: t(role),
    client_addr: t(`${role}_addr`),
    state: 'streaming',
    sync_state: 'async',
    lag_bytes: 500 * 1024 * 1024,
    write_lag_ms: 1000,
    flush_lag_ms: 1000,
    replay_lag_ms: 600_000,
  })
  const invalidConstraint = (role: string) => ({
    schema_name: s,
    table_name: t(`${role}_table`),
    constraint_name: t(role),
    constraint_type: 'check',
    definition: t(`CHECK ((${role} > 0)) NOT VALID`),
  })
  const bloated = (role: string, index: string | null) => ({
    kind: index === null ? ('table' as const) : ('index' as const),
    schema_name: s,
    table_name: t(role),
    index_name: index === null ? null : t(index),
    size_bytes: GB,
    expected_bytes: 0.1 * GB,
    bloat_bytes: 0.9 * GB,
    fillfactor: 100,
    live_rows: 1000,
  })
  const slot = (role: string, lag: number) => ({
    slot_name: t(role),
    slot_type: t('physical'),
    active: false,
    lag_bytes: lag,
    wal_status: 'extended',
  })
  return [
    // Three hours before: stmt1 at a tenth of its mean now (pg_statement_regressed, with its plan change).
    pgBatch(t('database'), now - 3 * HOUR, { query_stats: [statement('stmt1', 100, 20_000, 0)] }, v.text('16.4', 200)),
    // An earlier cycle: another start, version and settings (server_restarted, server_version_changed, setting_changed).
    pgBatch(
      t('database'),
      now - 20 * MINUTE,
      {
        server_state: {
          started_at: now - 24 * HOUR,
          settings: {
            synchronous_commit: 'on',
            archive_library: v.text('archive_library', 1000),
            max_connections: '100',
          },
        },
      },
      v.text('16.4', 200),
    ),
    pgBatch(t('database'), now - 5 * MINUTE, {
      server_state: {
        started_at: now - 6 * MINUTE,
        settings: { synchronous_commit: 'off', archive_library: '', max_connections: '50' },
      },
      database_stats: {
        blks_hit: 50_000,
        blks_read: 50_000,
        temp_files: 40,
        temp_bytes: 2 * GB,
        deadlocks: 10,
        connections_total: 95,
        max_connections: 100,
        superuser_reserved_connections: 3,
        xid_age: 1_600_000_000,
        mxid_age: 600_000_000,
        autovacuum_freeze_max_age: 200_000_000,
        autovacuum_multixact_freeze_max_age: 400_000_000,
        xmin_backend_age: 20_000_000,
        xmin_backend_pid: 4242,
        xmin_backend_xact_age_s: 7200,
        xmin_slot_age: 20_000_000,
        prepared_xacts: 2,
        xmin_prepared_age: 10_000_000,
        xmin_prepared_age_s: 7200,
        fsync_on: 0,
        track_counts_on: 0,
        autovacuum_on: 0,
        full_page_writes_on: 0,
        pg_stat_statements_installed: 0,
        // Most transactions rolled back (pg_rollback_ratio).
        xact_commit: 1_000,
        xact_rollback: 20_000,
      },
      bgwriter: { checkpoints_timed: 1, checkpoints_req: 9, checkpoint_write_time_ms: 1000 },
      // pg_wal at five times the default max_wal_size, no checkpoint for 30 minutes with 2 GB written since
      // its redo point (pg_wal_size, pg_checkpoint_overdue); a WAL file of a hostile name.
      wal_dir: {
        wal_files: 320,
        wal_bytes: 5 * GB,
        checkpoint_time: now - 35 * MINUTE,
        checkpoint_age_ms: 30 * MINUTE,
        redo_lsn: '0/A000278',
        redo_wal_file: v.text('walredo', 64),
        wal_since_redo_bytes: 2 * GB,
        in_recovery: false,
      },
      // A user trigger and a foreign key's internal trigger switched off (pg_disabled_triggers), hostile names.
      disabled_triggers: [
        {
          schema_name: s,
          table_name: t('trg_table'),
          trigger_name: t('trg'),
          internal: false,
          constraint_name: null,
          constraint_schema: null,
          constraint_table: null,
        },
        {
          schema_name: s,
          table_name: t('trg_parent'),
          trigger_name: t('trg_fk'),
          internal: true,
          constraint_name: t('trg_fkey'),
          constraint_schema: s,
          constraint_table: t('trg_child'),
        },
      ],
      query_stats: [statement('stmt1', 100, 200_000, 100_000), statement('stmt2', 100, 150_000, 50_000)],
      explain_plans: [
        plan('plan_old', now - 40 * MINUTE, 100, {
          'Node Type': 'Index Scan',
          'Relation Name': t('seq1'),
          'Plan Rows': 10,
        }),
        plan(
          'plan_new',
          now - 10 * MINUTE,
          1000,
          seqScan(t('seq1'), `(${quoteIdent(t('customer_id'))} = ${pgString(t('value'))})`),
        ),
      ],
      activity: [
        active(101, 'active', 400),
        active(102, 'active', 500),
        active(201, 'idle in transaction', 400),
        active(202, 'idle in transaction', 500),
        active(301, 'active', 100),
        active(302, 'active', 60, [301]),
        active(401, 'idle in transaction', 100),
        active(402, 'active', 90, [401]),
        active(502, 'active', 120, [0]),
        active(4242, 'idle in transaction', 10),
      ],
      locks: [lock(302, false), lock(402, false), lock(502, false), lock(301, true)],
      tables: [
        // Vacuumed after the holders began: VACUUM could not clean them (the holders below are named).
        table('dead1', {
          n_dead_tup: 60_000,
          n_live_tup: 10_000,
          autovacuum_enabled: true,
          last_autovacuum: now - 6 * MINUTE,
        }),
        table('dead2', {
          n_dead_tup: 50_000,
          n_live_tup: 10_000,
          autovacuum_enabled: false,
          last_vacuum: now - 6 * MINUTE,
        }),
        table('av1', { autovacuum_enabled: false, table_size_bytes: 9 * 1024 * 1024 }),
        table('av2', { autovacuum_enabled: false }),
        table('nopk1', { has_primary_key: false, table_size_bytes: 9 * 1024 * 1024 }),
        table('nopk2', { has_primary_key: false }),
        table('seq1', { n_live_tup: 50_000, seq_scan: 1000, table_size_bytes: 300 * 1024 * 1024, delta: seqDelta }),
        table('seq2', { n_live_tup: 50_000, seq_scan: 1000, table_size_bytes: 200 * 1024 * 1024, delta: seqDelta }),
      ],
      indexes: [
        index(t('unused1'), 'av1', ['a'], { idx_scan: 0, size_bytes: 3 * 1024 * 1024 }),
        index(t('unused2'), 'av1', ['b'], { idx_scan: 0, size_bytes: 2 * 1024 * 1024 }),
        index(t('dupa'), 'dup', ['a']),
        index(t('dupab'), 'dup', ['a', 'b']),
        index(t('dupc'), 'dup', ['c'], { size_bytes: 1024 * 1024 }),
        index(t('dupcd'), 'dup', ['c', 'd']),
        index(t('inv1'), 'nopk1', ['k'], { is_unique: true, is_valid: false }),
        index(`${t('inv1')}_ccnew`, 'nopk1', ['k'], { is_unique: true, is_valid: false }),
        index(t('inv2'), 'nopk1', ['l'], { is_valid: false }),
      ],
      // The named holders of the xmin horizon: the session (past the wraparound warning age, so that
      // pg_wraparound names it too), a slot and a prepared transaction, with hostile names and texts.
      xmin_holders: [
        {
          kind: 'backend',
          xmin_age: 600_000_000,
          since: now - 30 * MINUTE,
          pid: 4242,
          backend_type: 'client backend',
          user: v.user,
          application_name: t('holder_app'),
          client_addr: t('holder_addr'),
          state: 'idle in transaction',
          xact_start: now - 40 * MINUTE,
          state_change: now - 30 * MINUTE,
          query_text: v.text('holder_query', 1000),
          database: t('db'),
        },
        {
          kind: 'slot',
          xmin_age: 20_000_000,
          catalog_xmin_age: null,
          since: now - 30 * MINUTE,
          slot_name: t('slot1'),
          slot_type: 'physical',
          active: false,
          pid: null,
          database: null,
        },
        {
          kind: 'prepared',
          xmin_age: 10_000_000,
          since: now - 30 * MINUTE,
          gid: t('gid'),
          owner: v.user,
          database: t('db'),
          prepared_at: now - 120 * MINUTE,
        },
      ],
      // What the security advisors judge: a second superuser, an expiring password, MD5, a SECURITY
      // DEFINER function, a schema open to PUBLIC, a trust line, ssl off on every interface, no checksums.
      security: {
        password_encryption: 'md5',
        ssl: 'off',
        listen_addresses: `*, ${t('listen')}`,
        data_checksums: 'off',
        roles: [
          { name: 'postgres', superuser: true, bootstrap: true, can_login: true, valid_until: null },
          { name: t('su'), superuser: true, bootstrap: false, can_login: true, valid_until: null },
          {
            name: t('expiring'),
            superuser: false,
            bootstrap: false,
            can_login: true,
            valid_until: now + 2 * 24 * HOUR,
          },
        ],
        md5_roles: [t('md5role')],
        definer_functions: [
          { schema: v.schema, name: t('fn'), args: `${t('arg')} integer, text`, owner: v.user, owner_superuser: true },
        ],
        public_create_schemas: [v.schema],
        hba_rules: [
          {
            line_number: 90,
            type: 'host',
            database: [t('hbadb')],
            user_name: [v.user],
            address: t('addr'),
            netmask: t('mask'),
            auth_method: 'trust',
          },
        ],
      },
      sequences: [sequence('seqa', 0.95), sequence('seqb', 0.8)],
      unindexed_foreign_keys: [foreignKey('fk1'), foreignKey('fk2')],
      invalid_constraints: [invalidConstraint('ck1'), invalidConstraint('ck2')],
      bloat: [bloated('bloat1', null), bloated('bloat2', 'bloat2_idx')],
      replication: {
        is_replica: false,
        replication_lag_bytes: null,
        replication_lag_seconds: null,
        upstream_host: null,
        replicas: [replica('replica1'), replica('replica2')],
        slots: [slot('slot1', 3 * GB), slot('slot2', 2 * GB)],
      },
      // Archiving failing on a WAL file of a hostile name (the wire's 64 characters at most).
      archiver: {
        archive_mode: 'on',
        archive_command_set: true,
        archived_count: 10,
        last_archived_wal: v.text('walok', 64),
        last_archived_time: now - 30 * MINUTE,
        failed_count: 3,
        last_failed_wal: v.text('walfail', 64),
        last_failed_time: now - MINUTE,
        stats_reset: null,
        ready_count: 100,
        ready_bytes: 100 * 16 * 1024 ** 2,
        oldest_ready_time: now - 30 * MINUTE,
      },
      // Backups: the newest failed, the last success and the last full days old, the listing failing; hostile labels, stanza and error.
      backups: {
        tool: 'pgbackrest',
        checked_at: now - MINUTE,
        error: v.text('backup_error', 1000),
        backups: [
          {
            label: v.text('backup_failed', 200),
            type: 'incr',
            started_at: now - 2 * HOUR,
            finished_at: now - HOUR,
            size_bytes: 1,
            stored_bytes: 1,
            stanza: v.text('stanza', 1000),
            ok: false,
          },
          {
            label: v.text('backup_old', 200),
            type: 'diff',
            started_at: now - 80 * HOUR,
            finished_at: now - 80 * HOUR,
            size_bytes: 1,
            stored_bytes: 1,
            stanza: v.text('stanza', 1000),
            ok: true,
          },
          {
            label: v.text('backup_full', 200),
            type: 'full',
            started_at: now - 10 * 24 * HOUR,
            finished_at: now - 10 * 24 * HOUR,
            size_bytes: 1,
            stored_bytes: 1,
            stanza: v.text('stanza', 1000),
            ok: true,
          },
        ],
      },
      host: hostSection(v),
      // The server log: errors far above their (empty) baseline, a burst of failed logins, an autovacuum
      // cancelled three times, an out-of-memory entry, checkpoints for WAL, a temp file, a deadlock and the
      // archive failure, each with hostile names and texts; most counted but not sent whole (dropped).
      log_events: logSection(
        [
          logEntry('error', now - 3 * MINUTE, {
            severity: 'error',
            sqlstate: '23505',
            message: v.text('error_message', 8000),
            statement: v.text('error_statement', 8000),
            user: v.text('error_user', 1000),
          }),
          logEntry('auth_failed', now - 3 * MINUTE, {
            severity: 'fatal',
            message: v.text('auth_message', 8000),
            user: v.text('auth_user', 1000),
            client: v.text('auth_client', 1000),
          }),
          ...[1, 2, 3].map((i) =>
            logEntry('autovacuum_cancelled', now - (3 + i) * MINUTE, {
              severity: 'error',
              message: 'canceling autovacuum task',
              statement: v.text('blocker_statement', 8000),
              // as PostgreSQL logs it, db.schema.table unquoted (cut to the wire's 8,000 characters)
              fields: { table: `${v.text('db', 200)}.${s}.${t('dead1')}`.slice(0, 8000), blocker_pid: 4343 },
            }),
          ),
          logEntry('out_of_memory', now - 4 * MINUTE, {
            severity: 'error',
            message: v.text('oom_message', 8000),
            statement: v.text('oom_statement', 8000),
          }),
          // The host swaps, so out of memory is host_memory_pressure's evidence: pg_log_resource_faults fires on this.
          logEntry('could_not_fork', now - 4 * MINUTE, { severity: 'log', message: v.text('fork_message', 8000) }),
          ...[0, 1, 2, 3].map((i) =>
            logEntry('checkpoint', now - (2 + 5 * i) * MINUTE, { fields: { reason: 'wal', distance_bytes: GB } }),
          ),
          logEntry('temp_file', now - 2 * MINUTE, {
            message: v.text('temp_message', 8000),
            statement: v.text('temp_statement', 8000),
            fields: { size_bytes: 300 * 1024 ** 2, path: v.text('temp_path', 8000) },
          }),
          logEntry('deadlock', now - 2 * MINUTE, {
            severity: 'error',
            message: 'deadlock detected',
            fields: { statements: [v.text('deadlock_a', 8000), v.text('deadlock_b', 8000)] },
          }),
          logEntry('archive_failed', now - 2 * MINUTE, {
            severity: 'warning',
            message: v.text('archive_message', 8000),
            fields: { exit_code: 1, wal_file: v.text('walfail', 8000) },
          }),
        ],
        [
          ...Array.from({ length: 60 }, () => logEntry('error', now - 3 * MINUTE, { severity: 'error' })),
          ...Array.from({ length: 25 }, () => logEntry('auth_failed', now - 3 * MINUTE, { severity: 'fatal' })),
        ],
      ),
    }),
  ]
}

/** A host whose disk (holding the data, the WAL and a tablespace of the variant's name) is 97 % full, and which swaps. */
function hostSection(v: Variant): HostStatus {
  return {
    source: 'proc',
    evidence: 'connected over a Unix socket',
    cpu_count: 4,
    cpu: { user: 10, system: 5, iowait: 1, steal: 0, idle: 84 },
    load: { load1: 1, load5: 1, load15: 1 },
    memory: { total_bytes: 16 * GB, available_bytes: GB / 2, swap_total_bytes: 4 * GB, swap_used_bytes: 2 * GB },
    filesystems: [
      {
        roles: ['data', 'wal', v.text('tablespace:tsp', 200)],
        path: v.text('/srv/pg', 1000),
        mount: v.text('/srv', 1000),
        device: 'sda1',
        total_bytes: 100 * GB,
        available_bytes: 3 * GB,
        inodes_total: null,
        inodes_available: null,
      },
    ],
    devices: [],
  }
}

/** The ClickHouse telemetry that makes every ClickHouse rule fire: ten cycles a minute apart (query_p99 wants ten minutes). */
function clickhouseBatches(v: Variant, now: number): IngestBatch[] {
  const t = (role: string, max?: number) => v.text(role, max)
  const db = v.schema
  const part = (role: string, active: number, delay: number) => ({
    database: db,
    table: t(role),
    partition_id: t(`${role}_partition`),
    active_parts: active,
    rows: active * 10,
    bytes_on_disk: active * 1024,
    parts_to_delay_insert: delay,
    parts_to_throw_insert: delay * 3,
  })
  const merge = (role: string, mutation: boolean) => ({
    database: db,
    table: t(role),
    elapsed_s: 7200,
    progress: 0.5,
    num_parts: 10,
    total_size_bytes_compressed: GB,
    result_part_name: t(`${role}_part`),
    is_mutation: mutation,
  })
  const mutation = (role: string, failing: boolean) => ({
    database: db,
    table: t(role),
    mutation_id: t(`${role}_id`),
    command: t(`${role}_command`),
    create_time: now - 2 * 3600_000,
    is_done: false,
    parts_to_do: 3,
    latest_fail_reason: failing ? t(`${role}_reason`) : '',
    latest_fail_time: failing ? now - 60_000 : null,
    stuck: true,
  })
  const query = (role: string, seconds: number) => ({
    pid: t(role),
    query_text: t(`${role}_text`),
    state: null,
    wait_event_type: null,
    wait_event: null,
    duration_ms: seconds * 1000,
    blocking_pids: [],
    user: v.user,
    client_addr: t('addr'),
    application_name: t('client'),
    memory_usage: 1024,
    read_rows: 10,
    read_bytes: 1024,
  })
  const disk = t('disk', 40)
  // An earlier cycle: another start, version and profile settings (server_restarted, server_version_changed, setting_changed).
  const earlier = chBatch(t('server'), now - 20 * MINUTE, {
    server_metrics: { uptime_s: 86_400 },
    server_state: { settings: { max_memory_usage: '10000000000', [t('setting', 200)]: t('value', 1000) } },
  })
  earlier.database.engine_version = t('25.8.2.29', 200)
  const cycles = Array.from({ length: 10 }, (_, k) =>
    chBatch(t('server'), now - (k + 1) * MINUTE - 30_000, {
      ...(k === 0 ? { server_state: { settings: { max_memory_usage: '0', readonly: '1' } } } : {}),
      host: { ...hostSection(v), source: 'clickhouse', evidence: null, filesystems: [] },
      // Users without a password (open to every network, and restricted) and with one open to every
      // network, from users.xml and from SQL (ch_users_without_password, ch_users_any_host).
      ...(k === 0
        ? {
            clickhouse_users: {
              users: [
                {
                  name: t('user_open'),
                  storage: 'users_xml',
                  auth_type: ['no_password'],
                  host_ip: ['::/0'],
                  host_names: [],
                  host_names_regexp: [],
                  host_names_like: [],
                },
                {
                  name: t('user_sql_open'),
                  storage: 'local_directory',
                  auth_type: ['no_password'],
                  host_ip: [],
                  host_names: [],
                  host_names_regexp: ['.*'],
                  host_names_like: [],
                },
                {
                  name: t('user_local'),
                  storage: 'local_directory',
                  auth_type: ['no_password'],
                  host_ip: ['127.0.0.1'],
                  host_names: [t('host', 200)],
                  host_names_regexp: [],
                  host_names_like: [],
                },
                {
                  name: t('user_any'),
                  storage: 'local_directory',
                  auth_type: ['sha256_password'],
                  host_ip: [],
                  host_names: [],
                  host_names_regexp: [],
                  host_names_like: ['%'],
                },
                {
                  name: t('user_xml_any'),
                  storage: 'users_xml',
                  auth_type: ['plaintext_password'],
                  host_ip: ['::/0'],
                  host_names: [],
                  host_names_regexp: [],
                  host_names_like: [],
                },
              ],
            },
          }
        : {}),
      // Errors counted by system.errors, far above their (empty) baseline, with hostile messages.
      ...(k === 0
        ? {
            log_events: {
              ...logSection([
                logEntry('error', now - 2 * MINUTE, {
                  severity: 'error',
                  sqlstate: 'UNKNOWN_TABLE',
                  count: 100,
                  message: t('ch_error_message', 8000),
                  fingerprint: t('ch_error_pattern', 512),
                  fields: { code: 60, remote: false },
                }),
              ]),
              source: 'system_tables' as const,
            },
          }
        : {}),
      parts: [part('parts1', 1200, 1000), part('parts2', 600, 1000), part('many', 9000, 100_000)],
      merges: [merge('merge1', false), merge('merge2', true)],
      // A table with 100 mutations queued, young and none failing (ch_queued_mutations).
      mutations: [
        mutation('mutation1', true),
        mutation('mutation2', false),
        ...Array.from({ length: 100 }, (_, i) => ({
          ...mutation('queued', false),
          mutation_id: `mutation_${i + 1}.txt`,
          create_time: now - 60_000,
          stuck: false,
        })),
      ],
      activity: [query('query1', 4000), query('query2', 3000)],
      query_stats: [
        {
          query_hash: t('hash1', 64),
          query_text: t('statement1'),
          calls: 50,
          total_time_ms: 50_000,
          rows: 50,
          shared_blks_hit: 0,
          shared_blks_read: 0,
          errors: 20,
          p99_ms: 5000,
        },
        // Single-row INSERTs into a parts table, 100 a second (ch_small_inserts; ch_parts_per_partition names it).
        {
          query_hash: t('hash2', 64),
          query_text: `INSERT INTO ${chTable(db, t('parts1'))} FORMAT JSONEachRow`,
          calls: 6000,
          total_time_ms: 6000,
          rows: 6000,
          shared_blks_hit: 0,
          shared_blks_read: 0,
          errors: 0,
          p99_ms: 2,
        },
      ],
      server_metrics: {
        memory_tracked_bytes: 95 * GB,
        memory_limit_bytes: 100 * GB,
        [`disk.${disk}.free_bytes`]: 5 * GB,
        [`disk.${disk}.total_bytes`]: 100 * GB,
        replicas_readonly: 1,
        replication_queue_size: 2000,
        max_replica_delay_s: 4000,
        detached_parts: 5,
        queries_logged: 100,
        queries_logged_failed: 30,
        query_p99_ms: 20_000,
        delayed_inserts: 5,
        rejected_inserts: 0,
        uptime_s: k === 0 ? 300 : 86_400,
        // error signals (system.events deltas per cycle, system.metrics gauges): every signal rule fires
        distributed_connection_fail_try: 50,
        distributed_connection_fail_at_all: 5,
        buffer_flush_errors: 50,
        replicated_part_checks_failed: 5,
        replicated_part_failed_fetches: 50,
        replicated_data_loss: 1,
        zookeeper_hardware_exceptions: 50,
        file_read_failures: 50,
        file_write_failures: 50,
        dns_errors: 50,
        slow_reads: 500,
        zookeeper_sessions: 0,
        distributed_files_to_insert: 100_000,
        queries_preempted: 100,
        // The load at its limits (ch_running_queries, ch_connections).
        running_queries: 95,
        max_concurrent_queries: 100,
        tcp_connections: 4000,
        http_connections: 10,
        max_connections: 4096,
      },
    }),
  )
  return [earlier, ...cycles]
}

/** Thresholds that make each rule with a per-object limit name one object and count the rest in one more finding. */
const ONE_EACH: Record<string, Record<string, number>> = Object.fromEntries(
  rules.map((rule) => [
    rule.id,
    Object.fromEntries(
      Object.keys(rule.thresholds)
        .filter((k) => ['max_findings', 'max_slots', 'max_replicas', 'max_statements'].includes(k))
        .map((k) => [k, 1]),
    ),
  ]),
)

let server: TestServer
let account: Account
let key: string
let clickhouse: ClickHouseRig
const silent = createLogger('error', () => {})

/** Ingests the batches (one database) and diagnoses it; plus a database registered under a variant's name that never sent anything. */
async function findingsOf(v: Variant, engine: 'postgres' | 'clickhouse'): Promise<Finding[]> {
  const now = Date.now()
  const batches = engine === 'postgres' ? postgresBatches(v, now) : clickhouseBatches(v, now)
  // The operator's own check (custom_metric_threshold), judged on its latest sample (a minute old at most):
  // a label value and a description from the database and the config, hostile, in one more batch.
  const latest = batches.reduce((a, b) => (b.collected_at > a.collected_at ? b : a))
  const own: IngestBatch = {
    batch_id: crypto.randomUUID(),
    collected_at: Math.max(latest.collected_at + 1, now - 20_000),
    interval_seconds: 60,
    agent_version: latest.agent_version,
    database: { ...latest.database },
  }
  batches.push(own)
  own.custom_metrics = {
    definitions: [
      {
        name: 'outbox_rows',
        kind: 'gauge',
        labels: ['queue'],
        values: ['n'],
        interval_seconds: 60,
        description: v.text('description', 500),
        alert: { op: 'above', threshold: 10, for_seconds: 0, severity: 'warning' },
      },
    ],
    samples: [{ name: 'outbox_rows', column: 'n', labels: { queue: v.text('queue', 200) }, value: 11 }],
    errors: [],
  }
  let id = ''
  const name = `${engine} ${v.name} ${crypto.randomUUID()}`
  for (const batch of batches) {
    batch.database.name = name
    if (JSON.stringify(batch).includes('\\u0000')) {
      // The API refuses NUL in any request body (400): stored the way ingest stores a batch, to see what the rules make of it.
      const result = await server.store.ingest(account.orgId, batch, now)
      if (result.kind !== 'applied') throw new Error(`${v.name}: ingest ${result.kind}`)
      id = result.database.id
      continue
    }
    const res = await server.call('POST', '/api/v1/ingest', { apiKey: key, body: batch })
    if (res.status !== 200) throw new Error(`${v.name}: ingest ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`)
    id = res.body.database_id
  }
  // The agent's clock a minute ahead (agent_clock_skew): one batch of the header only, dated and sent so.
  const { database, agent_version } = batches[0]!
  const header = { batch_id: crypto.randomUUID(), collected_at: now + 60_000, interval_seconds: 10, agent_version }
  // (without a version: the database's stays as the batches left it)
  const ahead = await server.store.ingest(
    account.orgId,
    { ...header, database: { ...database, engine_version: undefined } },
    Date.now(),
    undefined,
    0,
    now + 60_000,
  )
  if (ahead.kind !== 'applied') throw new Error(`${v.name}: ingest ${ahead.kind}`)
  const deps = { store: server.store, log: silent, doctorThresholds: ONE_EACH }
  const db = (await server.store.getDatabase(account.orgId, id))!
  const diagnosis = await diagnose(deps, db, Date.now())
  expect({ variant: v.name, failed_rules: diagnosis.failed_rules }).toEqual({ variant: v.name, failed_rules: [] })
  if (engine === 'clickhouse') {
    // ch_log_error_rate stays quiet while ch_failed_queries names the errors (one finding per cause): its own commands come from a diagnosis where queries do not fail.
    const quiet = await diagnose(
      { ...deps, doctorThresholds: { ...ONE_EACH, ch_failed_queries: { min_queries: Number.MAX_SAFE_INTEGER } } },
      db,
      Date.now(),
    )
    diagnosis.findings.push(...quiet.findings.filter((f) => f.rule === 'ch_log_error_rate'))
  }
  // A database that never sent a batch, under a hostile name of at most 200 characters (the name's limit).
  const silentDb = await server.store.createDatabase(
    account.orgId,
    {
      name: `${engine} ${v.text('never')}`.slice(0, 200),
      engine,
      host: 'db.internal',
      port: 5432,
      tags: {},
      engine_version: null,
    },
    now,
  )
  if (silentDb === 'limit') throw new Error('database limit')
  const never = await diagnose(deps, silentDb, Date.now())
  // A database the agent reports down (database_unreachable; agent_disconnected is for an agent that went
  // silent, so it cannot fire beside it): the agent's report with a hostile driver message, under a hostile name.
  const downName = `${engine} down ${v.text('down')}`.slice(0, 200)
  const report: IngestBatch = {
    batch_id: crypto.randomUUID(),
    collected_at: now,
    interval_seconds: 10,
    agent_version: 'test',
    database: { name: downName, engine, host: 'db.internal', port: engine === 'postgres' ? 5432 : 8123 },
    availability: { state: 'down', since: now - 60_000, cause: 'refused', message: v.text('driver_message', 2000) },
  }
  const downId = await (async () => {
    if (JSON.stringify(report).includes('\\u0000')) {
      const result = await server.store.ingest(account.orgId, report, now)
      if (result.kind !== 'applied') throw new Error(`${v.name}: ingest ${result.kind}`)
      return result.database.id
    }
    const res = await server.call('POST', '/api/v1/ingest', { apiKey: key, body: report })
    if (res.status !== 200) throw new Error(`${v.name}: ingest ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`)
    return res.body.database_id as string
  })()
  const down = await diagnose(deps, (await server.store.getDatabase(account.orgId, downId))!, Date.now())
  return [...diagnosis.findings, ...never.findings, ...down.findings.filter((f) => f.rule === 'database_unreachable')]
}

// ---- commands ----

/** Commands that are not SQL: shell commands and API calls, recognised by their first word. */
const NOT_SQL = [
  'GET',
  'curl',
  'dbm',
  'journalctl',
  'systemctl',
  'vacuumdb',
  'grep',
  'kubectl',
  'pgbackrest',
  'wal-g',
  'free',
  'ps',
  'pg_isready',
  'timedatectl',
  'chronyc',
  'sudo',
]
const isSql = (command: string) => !NOT_SQL.includes(command.split(' ')[0]!) && !command.startsWith('#/')

/** Characters a command never carries: line breaks, controls, and the hidden characters (bidi marks, invisible format and tag characters). */
const UNSAFE = new RegExp(`[\\u0000-\\u001f\\u007f-\\u009f${HIDDEN_CHARACTERS}]`, 'u')

/** The command with each `<placeholder>` filled in: a statement where it names one, else an identifier. */
const filled = (command: string) =>
  command.replace(/<[A-Za-z][^<>'"`\n]*>/g, (p) => (/statement|query/.test(p) ? 'SELECT 1' : 'x'))

interface Parsed {
  /** The statements' kinds, in order. */
  kinds: string[]
  /** The tokens, with constants, identifiers and comments reduced to their class. */
  shape: string[]
}

/** PostgreSQL's token numbers (gram.y; the scanner names only some): IDENT and UIDENT; FCONST, SCONST, USCONST, BCONST, XCONST and ICONST; SQL_COMMENT and C_COMMENT. */
const PG_IDENTIFIER = [258, 259]
const PG_CONSTANT = [260, 261, 262, 263, 264, 266]
const PG_COMMENT = [275, 276]

/** libpg-query's scanner, failing with the text it could not scan. */
function scanned(sql: string) {
  try {
    return scanSync(sql)
  } catch (e) {
    throw new Error(`scan failed (${(e as Error).message}): ${JSON.stringify(sql.slice(0, 500))}`)
  }
}

function parsePostgres(command: string): Parsed {
  // psql's \gexec runs what the query returns: the query before it is the SQL.
  const sql = filled(command.split(' \\gexec')[0]!)
  const { tokens } = scanned(sql)
  // A comment alone is no statement (the parser refuses an empty query).
  const { stmts } = tokens.every((t) => t.tokenName.endsWith('COMMENT')) ? { stmts: [] } : parseSync(sql)
  const shape = tokens.map((token) => {
    if (PG_IDENTIFIER.includes(token.tokenType)) return 'identifier'
    if (PG_CONSTANT.includes(token.tokenType)) return 'constant'
    if (PG_COMMENT.includes(token.tokenType)) {
      // A comment never ends early: it is one token reaching to the end of the line, or a closed block.
      return 'comment'
    }
    // Anything else (keywords, operators, punctuation) is the rule's own text: never the monitored text.
    expect({
      command,
      token: token.text,
      marked: token.text.toLowerCase().includes(MARK) || token.text.includes('victim'),
    }).toEqual({ command, token: token.text, marked: false })
    return token.text.toUpperCase()
  })
  // Every constant the scanner saw means the same with standard_conforming_strings off: no backslash outside the E'' form.
  for (const token of tokens) {
    if (token.tokenType === 261 && !/^[eE]'/.test(token.text))
      expect({ command, constant: token.text, backslash: token.text.includes('\\') }).toEqual({
        command,
        constant: token.text,
        backslash: false,
      })
  }
  return { kinds: (stmts ?? []).map((s) => Object.keys(s.stmt ?? {})[0]!), shape }
}

interface Lexed {
  statements: string[]
  shape: string[]
}

/**
 * A strict ClickHouse lexer: string literals ('...' with backslash escapes and doubled quotes),
 * quoted identifiers (`...` and "..."), comments (-- to the end of the line, nested /* *\/), words,
 * numbers and operators; statements split on `;` outside all of them. Throws on an unterminated one.
 */
function lexClickHouse(sql: string, names: Set<string>): Lexed {
  const statements: string[] = []
  const shape: string[] = []
  let start = 0
  let i = 0
  const quoted = (quote: string) => {
    let j = i + 1
    for (;;) {
      if (j >= sql.length) throw new Error(`unterminated ${quote} in ${JSON.stringify(sql.slice(0, 200))}`)
      if (sql[j] === '\\') j += 2
      else if (sql[j] === quote && sql[j + 1] === quote) j += 2
      else if (sql[j] === quote) return j + 1
      else j++
    }
  }
  while (i < sql.length) {
    const c = sql[i]!
    if (/\s/.test(c)) i++
    else if (c === "'") {
      i = quoted("'")
      shape.push('constant')
    } else if (c === '`' || c === '"') {
      i = quoted(c)
      shape.push('identifier')
    } else if (sql.startsWith('--', i)) {
      const end = sql.indexOf('\n', i)
      i = end < 0 ? sql.length : end
      shape.push('comment')
    } else if (sql.startsWith('/*', i)) {
      let depth = 0
      do {
        if (i >= sql.length) throw new Error('unterminated comment')
        if (sql.startsWith('/*', i) || sql.startsWith('*/', i)) {
          depth += sql[i] === '/' ? 1 : -1
          i += 2
        } else i++
      } while (depth > 0)
      shape.push('comment')
    } else if (c === ';') {
      statements.push(sql.slice(start, i + 1))
      start = ++i
      shape.push(';')
    } else {
      const token = /^(?:[A-Za-z_][A-Za-z0-9_]*|[0-9][0-9.eE]*|[^\sA-Za-z0-9_'"`;])/.exec(sql.slice(i))![0]
      i += token.length
      if (names.has(token)) shape.push('identifier')
      else if (/^[0-9]/.test(token)) shape.push('constant')
      else {
        expect({ sql, token, marked: token.toLowerCase().includes(MARK) || token.includes('victim') }).toEqual({
          sql,
          token,
          marked: false,
        })
        shape.push(token.toUpperCase())
      }
    }
  }
  if (
    sql
      .slice(start)
      .replace(/--[^\n]*/g, '')
      .trim() !== ''
  )
    statements.push(sql.slice(start))
  return {
    statements: statements.filter(
      (s) =>
        s
          .replace(/--[^\n]*/g, '')
          .replace(/;\s*$/, '')
          .trim() !== '',
    ),
    shape,
  }
}

/** The kind of a statement as ClickHouse's parser reads it (the root of EXPLAIN AST), or the parser's error. */
async function clickhouseKind(statement: string): Promise<string> {
  // Over plain HTTP: the client appends a FORMAT clause, which a statement such as SYSTEM START MERGES would read as a table.
  const res = await fetch(`${clickhouse.url}/?default_format=TabSeparatedRaw`, {
    method: 'POST',
    body: `EXPLAIN AST ${statement.replace(/;\s*$/, '')}\n`,
    headers: { 'X-ClickHouse-User': clickhouse.user },
  })
  const text = await res.text()
  return res.status === 200 ? text.split(/\s/)[0]! : `error: ${text.slice(0, 200)}`
}

interface CommandReport {
  rule: string
  field: 'how_to_investigate' | 'how_to_fix'
  index: number
  sql: boolean
  kinds: string[]
  shape: string[]
}

/** Parses every command of every finding; checks what holds for any run; returns them by finding. */
async function commandsOf(
  findings: Finding[],
  engine: 'postgres' | 'clickhouse',
  names: Set<string>,
): Promise<Map<string, CommandReport[][]>> {
  const byRule = new Map<string, CommandReport[][]>()
  for (const f of findings) {
    const reports: CommandReport[] = []
    for (const field of ['how_to_investigate', 'how_to_fix'] as const) {
      for (const [index, command] of f[field].entries()) {
        // One line, no control or bidirectional character: what is shown is what is pasted.
        expect({ rule: f.rule, command, unsafe: UNSAFE.test(command) }).toEqual({
          rule: f.rule,
          command,
          unsafe: false,
        })
        if (!isSql(command) || f.rule === 'agent_disconnected') {
          // Shell and API commands: monitored text only after a shell comment, and URLs percent-encoded.
          let [code] = command.split(/\s+#\s|\s{3}--\s/)
          // An API call, or a page of the dashboard (`#/databases/<id>/queries/<hash>`): the path percent-encoded.
          if (command.startsWith('GET ') || command.startsWith('#/')) {
            const path = command.startsWith('#/') ? code!.slice(1) : code!.split(' ')[1]!
            expect({ rule: f.rule, path, encoded: /^[A-Za-z0-9\-._~%/?=&<>]+$/.test(path) }).toEqual({
              rule: f.rule,
              path,
              encoded: true,
            })
            code = code!
              .replace(/\/databases\/[^/\s]+/, '/databases/<db>')
              .replace(/\/queries\/[^/\s?]+/, '/queries/<id>')
          }
          expect({ rule: f.rule, code, marked: code!.toLowerCase().includes(MARK) }).toEqual({
            rule: f.rule,
            code,
            marked: false,
          })
          reports.push({ rule: f.rule, field, index, sql: false, kinds: [], shape: [code!] })
          continue
        }
        if (engine === 'postgres') {
          let parsed: Parsed
          try {
            parsed = parsePostgres(command)
          } catch (e) {
            throw new Error(
              `${f.rule} ${field}[${index}] does not parse: ${(e as Error).message}\n${command.slice(0, 500)}`,
            )
          }
          reports.push({ rule: f.rule, field, index, sql: true, ...parsed })
        } else {
          const lexed = lexClickHouse(filled(command), names)
          const kinds = await Promise.all(lexed.statements.map(clickhouseKind))
          expect({
            rule: f.rule,
            command: command.slice(0, 300),
            errors: kinds.filter((k) => k.startsWith('error')),
          }).toEqual({ rule: f.rule, command: command.slice(0, 300), errors: [] })
          reports.push({ rule: f.rule, field, index, sql: true, kinds, shape: lexed.shape })
        }
      }
    }
    // remediation_sql is the fix commands one per line: parsed together they are the same statements.
    if (
      engine === 'postgres' &&
      f.how_to_fix.length > 0 &&
      f.how_to_fix.every((c) => isSql(c) && !c.includes('\\gexec')) &&
      f.rule !== 'agent_disconnected'
    ) {
      const together = parsePostgres(f.how_to_fix.join('\n'))
      expect({ rule: f.rule, kinds: together.kinds }).toEqual({
        rule: f.rule,
        kinds: reports.filter((r) => r.field === 'how_to_fix').flatMap((r) => r.kinds),
      })
    }
    byRule.set(f.rule, [...(byRule.get(f.rule) ?? []), reports])
  }
  return byRule
}

/** What a run must show: every rule of the engine (and the engine-independent ones) fired. */
function expectEveryRuleFired(byRule: Map<string, unknown>, engine: 'postgres' | 'clickhouse', variant: string) {
  const expected = [
    ...rules.filter((r) => r.engine === 'any'),
    ...(engine === 'postgres' ? postgresRules : clickhouseRules),
  ]
    .map((r) => r.id)
    .sort()
  expect({ variant, fired: [...byRule.keys()].sort() }).toEqual({ variant, fired: expected })
}

/**
 * A command that ends or cancels a backend never names it by its pid alone (a pid is reused once its
 * session ends): no `pg_terminate_backend(123)`, and one aimed at `pid = 123` also matches a time of the
 * session: its start, or (from older agents) its transaction's or statement's (session-commands.ts). Bulk commands (`... (pid) FROM pg_stat_activity WHERE state ...`) name no pid.
 */
function expectSessionsMatched(findings: Finding[]) {
  for (const f of findings) {
    for (const command of [...f.how_to_fix, ...f.how_to_investigate]) {
      if (!/pg_(terminate|cancel)_backend/.test(command)) continue
      const bare = /pg_(terminate|cancel)_backend\(\s*\d/.test(command)
      const targeted = /\(pid\) FROM pg_stat_activity WHERE pid = \d/.test(command)
      expect({
        rule: f.rule,
        command,
        bare,
        unmatched: targeted && !/ (backend|xact|query)_start /.test(command),
      }).toEqual({ rule: f.rule, command, bare: false, unmatched: false })
    }
  }
}

beforeAll(async () => {
  await loadModule()
  ;[server, clickhouse] = await Promise.all([startTestServer('sqlite'), startClickHouse()])
  ;({ account, key } = await agentAccount(server))
})

afterAll(async () => {
  await Promise.all([server?.stop(), clickhouse?.stop()])
})

/** Every monitored text a run used, for the ClickHouse lexer to tell its bare names from keywords. */
function namesOf(findings: Finding[], v: Variant): Set<string> {
  const names = new Set([v.schema, v.user])
  for (const f of findings) for (const o of f.objects) for (const part of o.split(/[.:]/)) names.add(part)
  for (const role of [
    'parts1',
    'parts2',
    'many',
    'merge1',
    'merge2',
    'mutation1',
    'mutation2',
    'parts1_partition',
    'mutation1_id',
    'queued',
    'user_open',
    'user_sql_open',
    'user_local',
    'user_any',
    'user_xml_any',
  ])
    names.add(v.text(role))
  return names
}

for (const engine of ['postgres', 'clickhouse'] as const) {
  describe(`${engine}: every rule's commands`, () => {
    let meant: Map<string, CommandReport[][]>
    const variants = [
      ...Object.entries(PAYLOADS).map(([name, payload]) => hostile(name, payload)),
      ...(engine === 'clickhouse'
        ? Object.entries(CLICKHOUSE_PAYLOADS).map(([name, payload]) => hostile(name, payload))
        : []),
      engine === 'postgres' ? keywords : clickhouseKeywords,
    ]

    test('with harmless names every rule fires, and each command parses', async () => {
      const findings = await findingsOf(harmless, engine)
      meant = await commandsOf(findings, engine, namesOf(findings, harmless))
      expectEveryRuleFired(meant, engine, 'harmless')
      if (engine === 'postgres') expectSessionsMatched(findings)
    }, 120_000)

    for (const v of variants) {
      test(`hostile names and texts (${v.name}): the same statements, the text only inside constants, identifiers and comments`, async () => {
        expect(meant).toBeDefined()
        const findings = await findingsOf(v, engine)
        const got = await commandsOf(findings, engine, namesOf(findings, v))
        expectEveryRuleFired(got, engine, v.name)
        for (const [rule, findingsOfRule] of meant) {
          const strip = (list: CommandReport[][]) =>
            list.map((reports) =>
              reports.map(({ field, index, sql, kinds, shape }) => ({ field, index, sql, kinds, shape })),
            )
          expect({ variant: v.name, rule, commands: strip(got.get(rule)!) }).toEqual({
            variant: v.name,
            rule,
            commands: strip(findingsOfRule),
          })
        }
      }, 120_000)
    }
  })
}

describe('the quoting functions against the engines themselves', () => {
  const values = [
    ...Object.values(PAYLOADS).map((p) => `name${p}`.slice(0, 300)),
    'user',
    'current_user',
    'Mixed',
    'plain_name',
  ]

  test('PostgreSQL reads back every string constant, with standard_conforming_strings on and off, and every identifier', async () => {
    const pg = await sharedPostgres(17)
    const sql = postgres(pg.url(), { max: 1, onnotice: () => {} })
    try {
      for (const conforming of ['on', 'off']) {
        await sql.unsafe(`SET standard_conforming_strings = ${conforming}`)
        for (const value of values) {
          const [row] = await sql.unsafe(`SELECT ${pgString(value)} AS v`)
          expect({ conforming, value, read: row!.v }).toEqual({ conforming, value, read: value })
        }
      }
      for (const value of values) {
        // PostgreSQL keeps the first 63 bytes of a name.
        const name = value.slice(0, 20)
        const [row] = await sql.unsafe(`SELECT 1 AS ${pgIdent(name)}`)
        expect({ name, columns: Object.keys(row!) }).toEqual({ name, columns: [name] })
      }
    } finally {
      await sql.end({ timeout: 1 })
    }
  }, 60_000)

  test('ClickHouse reads back every string literal and identifier', async () => {
    for (const value of [...values, ...Object.values(CLICKHOUSE_PAYLOADS)]) {
      const [row] = await clickhouse.query<Record<string, string>>(
        `SELECT ${chString(value)} AS ${chIdent(`c${value}`)}`,
      )
      expect({ value, row }).toEqual({ value, row: { [`c${value}`]: value } })
    }
  }, 60_000)

  test('an index definition that is not what pg_get_indexdef writes is left out of the commands', () => {
    expect(pgIndexDefinition('CREATE INDEX i ON public.t USING btree (a); DROP TABLE public.victim')).toBeUndefined()
    expect(pgIndexDefinition('CREATE INDEX i ON public.t USING btree (a) -- x')).toBeUndefined()
    expect(pgIndexDefinition("CREATE INDEX i ON public.t USING btree ((a || E'\\''))")).toBeUndefined()
    expect(pgIndexDefinition('CREATE INDEX i ON public.t USING btree ((a || $$x$$))')).toBeUndefined()
    expect(pgIndexDefinition('CREATE INDEX i ON public.t USING btree (a\n)')).toBeUndefined()
    expect(pgIndexDefinition('CREATE INDEX i ON public.t USING btree ((a)')).toBeUndefined()
    expect(pgIndexDefinition('DROP TABLE public.victim')).toBeUndefined()
    expect(
      pgIndexDefinition('CREATE INDEX "i\n" ON public."t\'" USING btree (a) WHERE (b = \'x\\\')', {
        concurrently: true,
      }),
    ).toBe(`CREATE INDEX CONCURRENTLY U&"i\\000A" ON public."t'" USING btree (a) WHERE (b = E'x\\\\')`)
  })
})
