// Responses of /api/v1/api-keys, and the scopes a key may hold (the one list of their names: the
// server's scope table, the store and the dashboard's checkboxes all use it).
import { t } from 'elysia'
import { Nullable, Timestamp, Uuid } from './common.ts'

/**
 * What an API key may do: `ingest` sends the agent's batches, `read` reads the organization's databases
 * and their telemetry, `admin` manages API keys and the webhook, registers, reconfigures and deletes
 * databases. A user's session is never limited by scopes (roles apply).
 */
export const API_KEY_SCOPES = ['ingest', 'read', 'admin'] as const
// (ApiKey's schema spells the three out: Elysia's types do not follow a union mapped from this list.)
export type ApiKeyScope = (typeof API_KEY_SCOPES)[number]
/** A new key's scopes when the request names none: least privilege, `admin` only when asked for. */
export const DEFAULT_API_KEY_SCOPES: readonly ApiKeyScope[] = ['ingest', 'read']

export const ApiKeyCreator = t.Object(
  { id: Uuid(), email: t.String(), name: t.String() },
  { title: 'ApiKeyCreator', description: 'the user who created the key (or created the key that created it)' },
)

export const ApiKey = t.Object(
  {
    id: Uuid(),
    name: t.String(),
    prefix: t.String({ description: 'the start of the key, to tell keys apart (the secret is never shown again)' }),
    scopes: t.Array(t.Union([t.Literal('ingest'), t.Literal('read'), t.Literal('admin')]), {
      description: 'what the key may do: ingest, read, admin',
    }),
    created_by: Nullable(ApiKeyCreator),
    created_at: Timestamp(),
    last_used_at: Nullable(Timestamp('at most a minute late')),
    revoked_at: Nullable(Timestamp()),
  },
  { title: 'ApiKey' },
)

export const CreatedApiKey = t.Composite(
  [ApiKey, t.Object({ key: t.String({ description: 'the full key, shown in this response only' }) })],
  {
    title: 'CreatedApiKey',
  },
)
