// /api/v1/api-keys: list (active, or all with include_revoked), create (the full key is in this
// response only), revoke (204, rejected from the next request on).
import { Elysia, t } from 'elysia'
import { generateApiKey } from '../auth/api-keys.ts'
import { authenticate, requireOwner } from '../auth/principal.ts'
import type { Deps } from '../context.ts'
import { notFound } from '../http-error.ts'
import { fieldLimits } from '../limits.ts'
import { apiKeyView } from '../views.ts'
import { ApiKey, CreatedApiKey } from '../../shared/api/api-keys.ts'
import { NoContent } from '../../shared/api/common.ts'
import { ownersOnly } from '../openapi.ts'
import { body, boolean, pathId, query, requiredString } from './schema.ts'

const OWNERS = ownersOnly('manage API keys')

export function apiKeyRoutes(deps: Deps) {
  const { store, clock } = deps
  return new Elysia({ prefix: '/api/v1/api-keys' })
    .derive(async ({ request }) => ({ principal: requireOwner(await authenticate(deps, request), 'manage API keys') }))
    .get(
      '/',
      async ({ principal, query }) => (await store.listApiKeys(principal.orgId, query.include_revoked ?? false)).map(apiKeyView),
      { query: query({ include_revoked: t.Optional(boolean('include_revoked')) }), response: { 200: t.Array(ApiKey) }, detail: { summary: "The organization's API keys (active ones, or all with include_revoked)", responses: OWNERS } },
    )
    .post(
      '/',
      async ({ principal, body, set }) => {
        const generated = generateApiKey()
        const key = await store.createApiKey({
          id: Bun.randomUUIDv7(),
          org_id: principal.orgId,
          key_id: generated.keyId,
          name: body.name.trim(),
          secret_hash: generated.secretHash,
          created_by: principal.kind === 'user' ? principal.userId : null,
          created_at: clock(),
        })
        set.status = 201
        return { ...apiKeyView(key), key: generated.fullKey }
      },
      { body: body({ name: requiredString('name', fieldLimits.name) }), response: { 201: CreatedApiKey }, detail: { summary: 'Create an API key: the full key is in this answer only', responses: OWNERS } },
    )
    .delete('/:id', async ({ principal, params, set }) => {
      if (!(await store.revokeApiKey(principal.orgId, pathId(params.id, 'API key'), clock()))) throw notFound('API key')
      set.status = 204
    }, { response: { 204: NoContent }, detail: { summary: 'Revoke an API key: refused from the next request on', responses: OWNERS } })
}
