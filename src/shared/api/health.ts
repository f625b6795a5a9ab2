// Response of GET /healthz (src/server/healthz.ts): the server's own health, outside /api/v1.
import { t } from 'elysia'

const eventLoop = t.Optional(
  t.Object(
    {
      window_s: t.Number({ description: 'the span the figures cover, in seconds' }),
      samples: t.Integer({
        description: 'timer runs in the window (about 3,000 in 60 s; fewer when the loop was held)',
      }),
      lag_p50_ms: t.Number(),
      lag_p99_ms: t.Number(),
      lag_max_ms: t.Number(),
    },
    { description: 'how late the event loop ran over the last minute, in ms' },
  ),
)

export const Healthz = t.Object(
  {
    status: t.Literal('ok'),
    version: t.String(),
    store: t.Literal('ok'),
    signup: t.Union([t.Literal('open'), t.Literal('closed'), t.Literal('local')], {
      description:
        'whether the dashboard offers a signup form (DBM_SIGNUP); local: a `dbm local` server, signed in to with the link its process prints',
    }),
    event_loop: eventLoop,
  },
  { title: 'Healthz' },
)

export const HealthzUnavailable = t.Object(
  {
    status: t.Literal('unavailable'),
    version: t.String(),
    store: t.Literal('unavailable'),
    reason: t.Optional(
      t.String({
        description:
          "present when the store answers but refuses writes: the cause, e.g. the store's disk is full (SQLITE_FULL)",
      }),
    ),
    event_loop: eventLoop,
  },
  { title: 'HealthzUnavailable', description: 'the store does not answer, or refuses writes' },
)
