// Requests and responses of /api/v1/databases/{id}/actions: cancel or terminate a session, explain a
// statement with parameter values, run by the database's agent (src/server/routes/actions.ts says how).
import { t } from 'elysia'
import { Nullable, Timestamp, Uuid } from './common.ts'

const time = (what: string) => t.String({ maxLength: 64, description: `${what}, RFC 3339 as GET /active gives it` })

export const ActionSessionBody = t.Object(
  {
    pid: t.Integer({
      minimum: 1,
      maximum: 2_147_483_647,
      error: 'session.pid must be an integer from 1 to 2147483647',
    }),
    backend_start: time("the session's start (with the pid, what names it)"),
    xact_start: t.Optional(Nullable(time("its transaction's start"))),
    query_start: t.Optional(
      Nullable(time("its statement's start (a cancel ends that statement only while it still runs)")),
    ),
    user: t.Optional(Nullable(t.String({ maxLength: 256 }))),
    application_name: t.Optional(Nullable(t.String({ maxLength: 256 }))),
  },
  {
    additionalProperties: false,
    description: 'the session as GET /active reported it: a backend matching all of it is signalled, none other',
  },
)

export const NewAction = t.Object(
  {
    kind: t.Union([t.Literal('cancel'), t.Literal('terminate'), t.Literal('explain')], {
      error: 'kind must be one of: cancel, terminate, explain',
    }),
    session: t.Optional(ActionSessionBody),
    statement: t.Optional(
      t.String({
        maxLength: 100_000,
        description:
          'cancel, terminate: the statement the session ran, as shown (kept, cut to 500 characters, for the audit)',
      }),
    ),
    query_hash: t.Optional(
      t.String({
        minLength: 1,
        maxLength: 64,
        pattern: '^-?[0-9]+$',
        error: 'query_hash must be a statement hash as GET /queries names it',
      }),
    ),
    parameters: t.Optional(
      // Each value's size is bounded by the total the route checks (in bytes, with a message saying so).
      t.Array(Nullable(t.String()), {
        maxItems: 100,
        error: 'parameters: at most 100 values',
        description: 'explain: the values of $1, $2, … (null: NULL), as text; at most 100, of 16 KiB (UTF-8) in all',
      }),
    ),
  },
  {
    additionalProperties: false,
    examples: [{ kind: 'explain', query_hash: '-4212352190394016122', parameters: ['42'] }],
  },
)

export const ActionView = t.Object(
  {
    id: Uuid(),
    kind: t.UnionEnum(['cancel', 'terminate', 'explain']),
    state: t.UnionEnum(['pending', 'running', 'done', 'refused', 'failed', 'expired'], {
      description:
        'pending: waits for the agent; running: the agent took it; done; refused (reason); failed (reason); expired: not taken in time (never run later), or its result came after the expiry (agent_outcome, late_by_ms)',
    }),
    requested_by: t.String({ description: 'who asked: a user\'s email or "API key <id>"' }),
    requested_at: Timestamp(),
    expires_at: Timestamp('not started after this'),
    finished_at: Nullable(Timestamp()),
    session: t.Optional(
      t.Object({
        pid: t.Integer(),
        backend_start: Timestamp(),
        xact_start: Nullable(Timestamp()),
        query_start: Nullable(Timestamp()),
        user: Nullable(t.String()),
        application_name: Nullable(t.String()),
      }),
    ),
    statement: t.Optional(
      t.String({ description: "the session's statement as the dashboard showed it (the monitored database's text)" }),
    ),
    query_hash: t.Optional(t.String()),
    parameters: t.Optional(t.Array(Nullable(t.String()))),
    reason: t.Optional(
      t.String({ description: "refused, failed, expired: why (may hold the monitored database's text)" }),
    ),
    signalled: t.Optional(
      t.Boolean({
        description: 'cancel, terminate: whether a backend was signalled; false: that session had ended or moved on',
      }),
    ),
    plan: t.Optional(
      t.Unknown({ description: "explain: the first element of EXPLAIN (FORMAT JSON)'s answer (never ANALYZE)" }),
    ),
    agent_outcome: t.Optional(
      t.UnionEnum(['done', 'refused', 'failed'], {
        description:
          'expired: what the agent reported in a result that came after the expiry (not counted as run in time)',
      }),
    ),
    late_by_ms: t.Optional(
      t.Integer({ minimum: 0, description: "expired: how long after the expiry the agent's result came" }),
    ),
    command: t.Optional(
      t.String({
        description:
          'cancel, terminate: the same guarded command to run by hand (psql), selecting the backend by all of the session',
      }),
    ),
  },
  { title: 'Action' },
)

export const ActionList = t.Object(
  {
    allowed: Nullable(
      t.Array(t.UnionEnum(['cancel', 'terminate', 'explain']), {
        description:
          "what the database's agent allows (allow_actions in its config); null: no agent has asked for actions yet",
      }),
    ),
    agent_heard_at: Nullable(Timestamp("when the database's agent last asked for actions")),
    actions: t.Array(ActionView, { description: 'the latest, newest first' }),
  },
  { title: 'ActionList' },
)

/** The agent's long-poll answer (src/shared/wire.ts AgentActions, which the agent reads). */
export const AgentActionsAnswer = t.Object(
  {
    actions: t.Array(
      t.Object({
        id: Uuid(),
        kind: t.UnionEnum(['cancel', 'terminate', 'explain']),
        expires_in_ms: t.Integer({ minimum: 0, description: 'not started later than this' }),
        session: t.Optional(
          t.Object({
            pid: t.Integer(),
            backend_start: t.Integer({ description: 'epoch ms' }),
            xact_start: Nullable(t.Integer()),
            query_start: Nullable(t.Integer()),
            user: Nullable(t.String()),
            application_name: Nullable(t.String()),
          }),
        ),
        query_hash: t.Optional(t.String()),
        parameters: t.Optional(t.Array(Nullable(t.String()))),
      }),
    ),
  },
  { title: 'AgentActions' },
)
