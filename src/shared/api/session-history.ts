// Responses of /api/v1/databases/{id}/active/history (the times of kept session snapshots) and
// /locks/chains (lock chains seen in a window).
import { t } from 'elysia'
import { Nullable, Timestamp } from './common.ts'

/** One kept snapshot's time, with what the time slider marks. */
export const SnapshotTime = t.Object(
  {
    ts: Timestamp(),
    at: t.Integer({ description: 'the same time in epoch ms, to pass as `at` to /active and /locks' }),
    blocked: t.Integer({ description: 'sessions waiting for a lock' }),
    longest_wait_ms: Nullable(t.Integer({ description: 'the longest of their waits, ms; null: none waited' })),
    longest_ms: Nullable(t.Integer({ description: 'the longest statement or open transaction, ms' })),
  },
  { title: 'SnapshotTime' },
)

/** GET /active/history: the kept snapshots' times in the window, oldest first (the latest `limit` of them). */
export const SnapshotTimes = t.Object(
  {
    since: Timestamp(),
    until: Timestamp(),
    snapshots: t.Array(SnapshotTime),
    earlier_left_out: t.Boolean({
      description: 'more snapshots in the window than `limit`: the earliest were left out',
    }),
  },
  { title: 'SnapshotTimes' },
)

const text = (description: string) => Nullable(t.String({ description }))

/** A session of a chain that waited. */
export const LockChainMember = t.Object(
  {
    pid: t.Integer(),
    blocked_by: t.Array(t.Integer(), { description: 'the sessions it waited for' }),
    user: text(''),
    application: text(''),
    statement: text('its statement (the first 2,000 characters)'),
    waiting_since: Timestamp(),
    first_seen: Timestamp(),
    last_seen: Timestamp(),
  },
  { title: 'LockChainMember' },
)

/** A lock chain: a root session holding what others waited for, and the sessions that waited. */
export const LockChain = t.Object(
  {
    root: t.Object(
      {
        pid: t.Integer(),
        user: text(''),
        application: text(''),
        state: text('e.g. idle in transaction'),
        statement: text(''),
        xact_start: Nullable(Timestamp('when its transaction began')),
      },
      { description: 'the session at the head of the chain, which waits for none' },
    ),
    members: t.Array(LockChainMember),
    started_at: Timestamp('when the first member began waiting'),
    first_seen: Timestamp('the first kept snapshot that showed it'),
    last_seen: Timestamp('the last kept snapshot that showed it'),
    duration_ms: t.Integer({ description: 'last_seen - started_at, ms' }),
    samples: t.Integer({ description: 'kept snapshots that showed it' }),
    max_blocked: t.Integer({ description: 'the most sessions it held waiting at once' }),
    ongoing: t.Boolean({ description: 'the latest kept snapshot still shows it' }),
  },
  { title: 'LockChain' },
)
