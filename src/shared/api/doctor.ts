// Responses of /databases/{id}/overview and /doctor (src/server/routes/health.ts): the doctor's findings,
// its key figures of the database (metrics_summary, also spread into the overview) and the overview's
// statements and agent notes. A finding's `metrics` vary by rule: a map of number, string (a time in
// RFC 3339, a name) or null; everything else about a finding is fixed.
import { t } from 'elysia'
import { Nullable, Severity, Timestamp } from './common.ts'
import { QUERY_P99_DESCRIPTION } from './clickhouse.ts'
import { AvailabilityFields, Engine } from './databases.ts'

export const Category = t.Union([
  t.Literal('availability'),
  t.Literal('performance'),
  t.Literal('maintenance'),
  t.Literal('capacity'),
  t.Literal('configuration'),
  t.Literal('replication'),
  t.Literal('schema'),
  t.Literal('reliability'),
  t.Literal('security'),
])

export const Finding = t.Object(
  {
    rule: t.String({ description: 'the rule that raised it, e.g. pg_cache_hit_ratio' }),
    key: t.String({
      description:
        'stable identity: the rule plus the object (pg_dead_tuples:public.orders); recommendations and alerts are keyed by it',
    }),
    severity: Severity,
    category: Category,
    title: t.String(),
    detail: t.String({ description: 'what was measured, with the numbers and the objects involved' }),
    recommendation: t.String(),
    how_to_investigate: t.Array(t.String(), {
      description: 'steps, mostly queries to run on the database, that show the problem',
    }),
    how_to_fix: t.Array(t.String(), {
      description: 'commands that fix it; empty for an organization that has not verified its email',
    }),
    how_to_fix_locked: t.Optional(
      t.String({ description: 'present (and how_to_fix empty) while the organization has not verified its email' }),
    ),
    objects: t.Array(t.String(), { description: 'objects involved: schema.table, pid 123, slot x, ...' }),
    metrics: t.Record(t.String(), Nullable(t.Union([t.Number(), t.String()])), {
      description:
        'the measured values the rule judged, by name; they vary by rule (units in the name: _ms, _bytes, _s); points in time (names ending in _at or _since, and catalog times such as last_autovacuum) are RFC 3339',
    }),
    as_of: Nullable(Timestamp('when the data the finding was drawn from was collected; null only before any data')),
    cause: t.String({
      description:
        "the key of its cause's group (groups[].key): session:pid 3161, holder:slot x, index:public.orders(customer_id), statement:<query hash>, table:public.orders, or the finding's own key when it is its own cause",
    }),
  },
  { title: 'Finding' },
)

export const CauseKind = t.Union([
  t.Literal('session'),
  t.Literal('holder'),
  t.Literal('index'),
  t.Literal('statement'),
  t.Literal('table'),
  t.Literal('finding'),
])

export const FindingGroup = t.Object(
  {
    key: t.String({ description: 'the cause: one issue, and one alert (alerts[].key), per cause' }),
    kind: CauseKind,
    severity: t.Union(Severity.anyOf, { description: "the worst of its findings'" }),
    title: t.String({ description: "the leading finding's title" }),
    lead: t.String({ description: 'the key of the finding that describes the cause itself' }),
    findings: t.Array(t.String(), {
      description: "its findings' keys: the lead first, then its consequences worst first",
    }),
    objects: t.Array(t.String(), { description: 'the objects of its findings, each once' }),
    how_to_fix: t.Array(t.String(), {
      description:
        "its findings' fix commands, a cure that serves several of them once; empty for an organization that has not verified its email",
    }),
    how_to_fix_locked: t.Optional(
      t.String({ description: 'present (and how_to_fix empty) while the organization has not verified its email' }),
    ),
  },
  { title: 'FindingGroup' },
)

const PG = 'PostgreSQL only'
const CH = 'ClickHouse only'

/** The database's key figures, shared by the doctor's metrics_summary and the overview. */
const figures = {
  active_queries: t.Integer({ description: 'queries running now (PostgreSQL: sessions in state active)' }),
  longest_query_ms: Nullable(t.Number({ description: 'ms: the longest running of them; null when none' })),
  server_started_at: Nullable(
    Timestamp(
      'when the database server started (PostgreSQL: pg_postmaster_start_time(); ClickHouse: now less uptime()); null before an agent said',
    ),
  ),
  uptime_s: Nullable(
    t.Integer({
      description:
        's: from that start to the arrival of the latest batch (not to now: a database that stopped sending is not known to be up); null without either',
    }),
  ),
  blocked_queries: t.Optional(t.Integer({ description: `${PG}: sessions waiting on another's lock` })),
  cache_hit_ratio: t.Optional(
    Nullable(
      t.Number({
        description: `${PG}: share of block reads found in shared buffers over the last hour, 0-1; null without reads`,
      }),
    ),
  ),
  dead_tuple_ratio: t.Optional(
    Nullable(t.Number({ description: `${PG}: dead / (live + dead) tuples of all tables, 0-1` })),
  ),
  last_autovacuum: t.Optional(Nullable(Timestamp(`${PG}: the latest autovacuum of any table`))),
  active_merges: t.Optional(t.Integer({ description: CH })),
  merge_progress_pct: t.Optional(
    Nullable(t.Number({ description: `${CH}: the running merges' mean progress, percent 0-100; null without merges` })),
  ),
  active_mutations: t.Optional(t.Integer({ description: `${CH}: mutations not done` })),
  stuck_mutations: t.Optional(t.Integer({ description: CH })),
  query_p99_ms: t.Optional(Nullable(t.Number({ description: `${CH}: ${QUERY_P99_DESCRIPTION}` }))),
  as_of: Nullable(Timestamp('when the data of these figures was collected; null before any')),
}

export const MetricsSummary = t.Object(
  {
    ...figures,
    findings: t.Object(
      { critical: t.Integer(), warning: t.Integer(), info: t.Integer() },
      { description: 'findings by severity' },
    ),
    rules_evaluated: t.Integer(),
  },
  { title: 'MetricsSummary' },
)

export const Doctor = t.Object(
  {
    status: t.Union([t.Literal('healthy'), t.Literal('degraded'), t.Literal('unhealthy')], {
      description: 'unhealthy with a critical finding, degraded with a warning, else healthy',
    }),
    score: t.Integer({ description: '0-100: 100 less a penalty per rule by its worst finding' }),
    evaluated_at: Timestamp(),
    top_issues: t.Array(Finding, { description: 'the worst first, at most 100' }),
    groups: t.Array(FindingGroup, {
      description:
        'every finding grouped by cause, the worst first, at most 100: the cause leads, its consequences follow',
    }),
    metrics_summary: MetricsSummary,
  },
  { title: 'Doctor' },
)

export const AgentNote = t.Object({
  collector: t.String(),
  message: t.String(),
  level: t.Optional(
    t.Literal('info', { description: 'left out by design, not to act on; absent for a note to act on' }),
  ),
})

export const TopQuery = t.Object({
  query_hash: t.String(),
  query_text: t.String(),
  total_calls: t.Number(),
  total_time_ms: t.Number({ description: 'ms' }),
  mean_time_ms: t.Number({ description: 'ms' }),
})

export const Overview = t.Object(
  {
    engine: Engine,
    status: t.Union([t.Literal('connected'), t.Literal('disconnected')]),
    last_seen_at: Nullable(Timestamp('when the last batch with data arrived')),
    ...AvailabilityFields,
    uptime_24h: Nullable(
      t.Number({
        minimum: 0,
        maximum: 1,
        description: 'up / (up + down) over the last 24 hours; time the agent was silent counts as neither',
      }),
    ),
    uptime_30d: Nullable(
      t.Number({
        minimum: 0,
        maximum: 1,
        description: 'the same over 30 days (per day: GET /databases/{id}/availability)',
      }),
    ),
    uptime_24h_watched_ms: t.Number({ description: 'the time uptime_24h stands on: up + down of the last 24 hours' }),
    uptime_30d_watched_ms: t.Number({
      description: 'the time uptime_30d stands on: up + down of the last 30 days, from the registration on',
    }),
    health_score: t.Integer({ description: "the doctor's score, 0-100" }),
    ...figures,
    cache_hit_ratio: t.Optional(
      Nullable(
        t.Number({
          description: `${PG}: share of block reads found in shared buffers, 0-1, over the window asked for (else the last hour); null without reads`,
        }),
      ),
    ),
    agent_notes: t.Array(AgentNote, {
      description: "what the agent's collectors reported in its latest batch (e.g. query_log disabled)",
    }),
    top_queries: t.Array(TopQuery, {
      description: 'the costliest statements by total time, of the window asked for (else the last 24 hours)',
    }),
    since: t.Optional(Timestamp('the window asked for, as read; only when since or until was given')),
    until: t.Optional(Timestamp()),
  },
  { title: 'Overview' },
)
