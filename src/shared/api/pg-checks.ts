// Responses of the PostgreSQL checks (src/server/routes/pg-checks.ts): NOT VALID constraints, the bloat
// estimate, client connections and maintenance commands running now, each from the latest snapshot of its
// section with the time it was collected (null, and the lists empty, before any: an agent that predates a
// section never sends it).
import { t } from 'elysia'
import { Nullable, Timestamp } from './common.ts'

const collectedAt = Nullable(Timestamp('when the agent collected the snapshot; null before any'))

export const InvalidConstraint = t.Object({
  schema_name: t.String(),
  table_name: t.String(),
  constraint_name: t.String(),
  constraint_type: t.String({ description: 'check, foreign key or (PostgreSQL 18+) not null' }),
  definition: t.String({ description: 'pg_get_constraintdef(), e.g. `CHECK ((qty > 0)) NOT VALID`' }),
  validate_sql: t.String({ description: 'the ALTER TABLE ... VALIDATE CONSTRAINT command, names quoted' }),
})

export const InvalidConstraints = t.Object(
  { collected_at: collectedAt, constraints: t.Array(InvalidConstraint) },
  { title: 'InvalidConstraints' },
)

export const BloatEntry = t.Object({
  kind: t.Union([t.Literal('table'), t.Literal('index')]),
  schema_name: t.String(),
  table_name: t.String(),
  index_name: Nullable(t.String({ description: 'null for a table' })),
  size_bytes: t.Number({ description: "bytes: the main fork's size at the last VACUUM, ANALYZE or index build" }),
  expected_bytes: t.Number({ description: 'bytes the live rows would take packed at the fillfactor' }),
  bloat_bytes: t.Number({ description: 'bytes: size_bytes - expected_bytes, never below 0' }),
  fillfactor: t.Number({ description: 'percent, 10-100' }),
  live_rows: t.Number({ description: 'pg_class.reltuples the estimate is built on' }),
  bloat_ratio: t.Number({ description: 'bloat_bytes / size_bytes, 0-1 to three decimals (0 for an empty relation)' }),
})

export const Bloat = t.Object(
  {
    estimated_at: collectedAt,
    estimate: t.Literal(true, { description: 'always true: the numbers are an estimate, not a measurement' }),
    method: t.String({ description: 'how the estimate is made' }),
    entries: t.Array(BloatEntry, { description: 'the most bloated first' }),
  },
  { title: 'Bloat' },
)

export const ConnectionCount = t.Object({
  value: Nullable(t.String({ description: 'null: not known to the monitoring role' })),
  count: t.Number(),
})

export const ConnectionGroup = t.Object({
  database: Nullable(t.String()),
  user: Nullable(t.String()),
  application_name: Nullable(t.String()),
  client_addr: Nullable(t.String()),
  state: Nullable(t.String({ description: 'active, idle, idle in transaction, ...' })),
  count: t.Number(),
})

const counts = (by: string) =>
  t.Array(ConnectionCount, { description: `connections by ${by}, the most first (null last among ties)` })

export const Connections = t.Object(
  {
    collected_at: collectedAt,
    total: t.Number({ description: 'client connections in the snapshot' }),
    slots: Nullable(
      t.Object(
        {
          max_connections: t.Integer(),
          superuser_reserved_connections: t.Integer(),
          reserved_connections: t.Integer({
            description: 'PostgreSQL 16+: slots for roles with pg_use_reserved_connections; 0 before',
          }),
          usable: t.Integer({
            description:
              'max_connections - superuser_reserved_connections - reserved_connections: what ordinary roles may open',
          }),
          used_ratio: t.Number({
            description: 'total / usable, 0-1 (above 1 when superusers use their reserved slots), 4 decimals',
          }),
          headroom: t.Integer({
            description: 'usable - total: connections ordinary roles may still open (negative into the reserved slots)',
          }),
          by_state: t.Array(
            t.Object({
              value: Nullable(t.String()),
              count: t.Number(),
              ratio: t.Number({ description: 'count / usable, 4 decimals' }),
            }),
          ),
        },
        { description: 'the connections against max_connections, from the settings the agent sent; null before any' },
      ),
    ),
    by_state: counts('state'),
    by_user: counts('user'),
    by_application: counts('application name'),
    by_client: counts('client address'),
    by_database: counts('database'),
    groups: t.Array(ConnectionGroup, {
      description: 'connections with the same database, user, application, client address and state',
    }),
  },
  { title: 'Connections' },
)

export const ProgressOperation = t.Object({
  pid: t.Integer(),
  command: t.String({
    description:
      'VACUUM, ANALYZE, autovacuum: VACUUM, VACUUM FULL, CLUSTER, CREATE INDEX [CONCURRENTLY], REINDEX [CONCURRENTLY]',
  }),
  phase: t.String(),
  schema_name: Nullable(t.String()),
  table_name: Nullable(t.String()),
  index_name: Nullable(t.String({ description: 'CREATE INDEX / REINDEX: the index built' })),
  unit: Nullable(t.String({ description: 'what done and total count, e.g. `heap blocks scanned`' })),
  done: Nullable(t.Number()),
  total: Nullable(t.Number()),
  percent: Nullable(t.Number({ description: 'done / total, percent 0-100; null when the phase has no counter' })),
  started_at: Nullable(Timestamp("when the command's statement started")),
  wait_event_type: Nullable(
    t.String({
      description:
        "the command's backend's pg_stat_activity.wait_event_type; null: not waiting, or an agent older than this field",
    }),
  ),
  wait_event: Nullable(
    t.String({ description: 'e.g. `virtualxid` while CREATE INDEX CONCURRENTLY waits for an old snapshot' }),
  ),
  lockers_done: Nullable(
    t.Number({ description: 'CREATE INDEX / REINDEX: lockers already waited for; null for other commands' }),
  ),
  lockers_total: Nullable(t.Number({ description: 'CREATE INDEX / REINDEX: lockers to wait for in this phase' })),
  current_locker_pid: Nullable(
    t.Integer({
      description:
        'CREATE INDEX / REINDEX: the pid of the session waited for now (pg_stat_progress_create_index); null: none',
    }),
  ),
  blocker: Nullable(
    t.Object(
      {
        pid: t.Integer(),
        via: t.Union([t.Literal('current_locker_pid'), t.Literal('pg_blocking_pids')], {
          description: 'where the pid comes from',
        }),
        user: Nullable(t.String()),
        application_name: Nullable(t.String()),
        client_addr: Nullable(t.String()),
        backend_type: Nullable(t.String()),
        state: Nullable(t.String({ description: 'pg_stat_activity.state, e.g. `idle in transaction`' })),
        xact_start: Nullable(Timestamp('when its transaction started')),
        state_change: Nullable(Timestamp('when it entered its state')),
        transaction_age_ms: Nullable(
          t.Number({ description: "ms: its transaction's age when the snapshot was collected" }),
        ),
        state_age_ms: Nullable(
          t.Number({ description: 'ms: how long it had been in its state when the snapshot was collected' }),
        ),
        query_text: Nullable(t.String({ description: 'its current or last statement, secrets masked' })),
      },
      { description: 'the session the command waits for, as pg_stat_activity showed it; null: none' },
    ),
  ),
})

export const Progress = t.Object(
  { collected_at: collectedAt, operations: t.Array(ProgressOperation) },
  { title: 'Progress' },
)
