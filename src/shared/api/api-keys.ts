// Responses of /api/v1/api-keys.
import { t } from 'elysia'
import { Nullable, Timestamp, Uuid } from './common.ts'

export const ApiKey = t.Object(
  {
    id: Uuid(),
    name: t.String(),
    prefix: t.String({ description: 'the start of the key, to tell keys apart (the secret is never shown again)' }),
    created_at: Timestamp(),
    last_used_at: Nullable(Timestamp('at most a minute late')),
    revoked_at: Nullable(Timestamp()),
  },
  { title: 'ApiKey' },
)

export const CreatedApiKey = t.Composite([ApiKey, t.Object({ key: t.String({ description: 'the full key, shown in this response only' }) })], {
  title: 'CreatedApiKey',
})
