// /api/v1/api-keys: list (active, or all with include_revoked; each with its scopes and creator), create
// (the full key is in this response only), revoke (204, rejected from the next request on). Owners, and
// keys with the `admin` scope (scopes.ts). A new key has the scopes asked for, else ingest and read; a key
// creating a key can grant only scopes it holds, and the new key records the creating key and that key's
// creator, so that removing or demoting the creator revokes both (accounts/members.ts).
import { Elysia, t } from 'elysia'
import { generateApiKey } from '../auth/api-keys.ts'
import { authenticate, requireOwner } from '../auth/principal.ts'
import type { Deps } from '../context.ts'
import { forbidden, notFound, unauthorized } from '../http-error.ts'
import { CreatorRevokedError } from '../store/accounts/api-keys.ts'
import { fieldLimits } from '../limits.ts'
import { apiKeyView } from '../views.ts'
import {
  API_KEY_SCOPES,
  ApiKey,
  type ApiKeyScope,
  CreatedApiKey,
  DEFAULT_API_KEY_SCOPES,
} from '../../shared/api/api-keys.ts'
import { NoContent } from '../../shared/api/common.ts'
import { errorAnswers } from '../openapi.ts'
import { body, boolean, oneOf, pathId, query, requiredString } from './schema.ts'

const OWNERS = errorAnswers({
  403: "a member (only an owner can manage API keys), or an API key without the 'admin' scope",
})

const scopesField = t.Array(oneOf('scopes', API_KEY_SCOPES), {
  minItems: 1,
  maxItems: API_KEY_SCOPES.length,
  uniqueItems: true,
  description: `what the key may do (default: ${DEFAULT_API_KEY_SCOPES.join(', ')}): ingest sends the agent's batches, read reads databases and telemetry, admin manages API keys, the webhook and databases`,
  error: `scopes must be a list of distinct scopes, at least one, from: ${API_KEY_SCOPES.join(', ')}`,
})

export function apiKeyRoutes(deps: Deps) {
  const { store, clock } = deps
  return new Elysia({ prefix: '/api/v1/api-keys' })
    .derive(async ({ request }) => ({ principal: requireOwner(await authenticate(deps, request), 'manage API keys') }))
    .get(
      '/',
      async ({ principal, query }) =>
        (await store.listApiKeys(principal.orgId, query.include_revoked ?? false)).map((k) => apiKeyView(k, k.creator)),
      {
        query: query({ include_revoked: t.Optional(boolean('include_revoked')) }),
        response: { 200: t.Array(ApiKey) },
        detail: {
          summary:
            "The organization's API keys (active ones, or all with include_revoked), with their scopes and creators",
          responses: OWNERS,
        },
      },
    )
    .post(
      '/',
      async ({ principal, body, set }) => {
        const scopes: ApiKeyScope[] = [...(body.scopes ?? DEFAULT_API_KEY_SCOPES)]
        if (principal.kind === 'api_key') {
          // A key made by a key before keys recorded their creators answers to nobody: removing a user never
          // reaches it, so it may not make more keys that would not either.
          if (principal.createdBy === null) {
            throw forbidden(
              'this API key has no known creator (a key made it before keys recorded theirs), so it cannot create keys: an owner can',
            )
          }
          const missing = scopes.find((s) => !principal.scopes.includes(s))
          if (missing) throw forbidden(`this API key cannot grant the '${missing}' scope: it does not hold it`)
        }
        const createdBy = principal.kind === 'user' ? principal.userId : principal.createdBy
        const generated = generateApiKey()
        let key
        try {
          key = await store.createApiKey({
            id: Bun.randomUUIDv7(),
            org_id: principal.orgId,
            key_id: generated.keyId,
            name: body.name.trim(),
            secret_hash: generated.secretHash,
            scopes,
            created_by: createdBy,
            created_by_key: principal.kind === 'api_key' ? principal.apiKeyId : null,
            created_at: clock(),
          })
        } catch (e) {
          // The creator was removed or demoted (their keys revoked) while this request was on its way.
          if (e instanceof CreatorRevokedError) throw e.by === 'key' ? unauthorized(e.message) : forbidden(e.message)
          throw e
        }
        const creator = createdBy === null ? undefined : await store.getUser(createdBy)
        set.status = 201
        return {
          ...apiKeyView(key, creator && creator.org_id === principal.orgId ? creator : null),
          key: generated.fullKey,
        }
      },
      {
        body: body({ name: requiredString('name', fieldLimits.name), scopes: t.Optional(scopesField) }),
        response: { 201: CreatedApiKey },
        detail: {
          summary:
            'Create an API key: the full key is in this answer only. Scopes default to ingest and read; a key creating one grants only scopes it holds',
          responses: OWNERS,
        },
      },
    )
    .delete(
      '/:id',
      async ({ principal, params, set }) => {
        if (!(await store.revokeApiKey(principal.orgId, pathId(params.id, 'API key'), clock())))
          throw notFound('API key')
        set.status = 204
      },
      {
        response: { 204: NoContent },
        detail: { summary: 'Revoke an API key: refused from the next request on', responses: OWNERS },
      },
    )
}
