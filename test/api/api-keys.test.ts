// API keys through HTTP on both stores: create (full key once), list with prefix only,
// include_revoked, revoke 204 with immediate effect, both accepted headers.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type TestServer, createApiKey, signup, startTestServer, storeKinds } from '../support/server.ts'
import { until } from '../support/wait.ts'

for (const kind of storeKinds) {
  describe(`api keys (${kind})`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startTestServer(kind)
    })
    afterAll(async () => {
      await server.stop()
    })

    test('create returns the full key once; lists show only the prefix', async () => {
      const account = await signup(server)
      const res = await server.call('POST', '/api/v1/api-keys', { token: account.token, body: { name: 'collector' } })
      expect(res.status).toBe(201)
      expect(res.body.key).toMatch(/^dbm_ak_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$/)
      const keyId = res.body.key.split('_')[2]
      expect(res.body).toMatchObject({
        name: 'collector',
        prefix: `dbm_ak_${keyId}_...`,
        last_used_at: null,
        revoked_at: null,
      })

      const list = await server.call('GET', '/api/v1/api-keys', { token: account.token })
      expect(list.status).toBe(200)
      expect(list.body).toHaveLength(1)
      expect(Object.keys(list.body[0]).sort()).toEqual([
        'created_at',
        'created_by',
        'id',
        'last_used_at',
        'name',
        'prefix',
        'revoked_at',
        'scopes',
      ])
      expect(JSON.stringify(list.body)).not.toContain(res.body.key.split('_').slice(3).join('_'))
    })

    test('both X-API-Key and Authorization: Bearer authenticate; last_used_at is recorded', async () => {
      const account = await signup(server)
      const { key } = await createApiKey(server, account)
      const viaHeader = await server.call('GET', '/api/v1/databases', { apiKey: key })
      const viaBearer = await server.call('GET', '/api/v1/databases', { headers: { authorization: `Bearer ${key}` } })
      expect(viaHeader.status).toBe(200)
      expect(viaBearer.status).toBe(200)
      // A key can create further keys.
      const child = await server.call('POST', '/api/v1/api-keys', { apiKey: key, body: { name: 'made by a key' } })
      expect(child.status).toBe(201)
      // The use is recorded after the request is answered, without holding it up.
      const used = await until(
        'last_used_at to be recorded',
        async () => {
          const list = await server.call('GET', '/api/v1/api-keys', { token: account.token })
          const key = list.body.find((k: any) => k.name === 'test key')
          return key?.last_used_at ? key : undefined
        },
        { everyMs: 20 },
      )
      expect(Date.parse(used.last_used_at)).toBeGreaterThan(Date.now() - 60_000)
    })

    test('revoke answers 204 and the key is rejected on the very next request', async () => {
      const account = await signup(server)
      const { id, key } = await createApiKey(server, account)
      expect((await server.call('GET', '/api/v1/databases', { apiKey: key })).status).toBe(200)
      const revoke = await server.call('DELETE', `/api/v1/api-keys/${id}`, { token: account.token })
      expect(revoke.status).toBe(204)
      expect(revoke.body).toBeNull()
      const after = await server.call('GET', '/api/v1/databases', { apiKey: key })
      expect(after.status).toBe(401)
      expect(after.body).toEqual({ error: 'API key has been revoked' })

      const active = await server.call('GET', '/api/v1/api-keys', { token: account.token })
      expect(active.body).toEqual([])
      const all = await server.call('GET', '/api/v1/api-keys?include_revoked=true', { token: account.token })
      expect(all.body).toHaveLength(1)
      expect(all.body[0].id).toBe(id)
      expect(Date.parse(all.body[0].revoked_at)).toBeGreaterThan(0)
      const explicitFalse = await server.call('GET', '/api/v1/api-keys?include_revoked=false', { token: account.token })
      expect(explicitFalse.body).toEqual([])

      // Revoking again is harmless; an unknown id is 404, one that is not a UUID a 400.
      expect((await server.call('DELETE', `/api/v1/api-keys/${id}`, { token: account.token })).status).toBe(204)
      const unknown = await server.call('DELETE', '/api/v1/api-keys/00000000-0000-7000-8000-000000000000', {
        token: account.token,
      })
      expect({ status: unknown.status, body: unknown.body }).toEqual({
        status: 404,
        body: { error: 'API key not found' },
      })
      const malformed = await server.call('DELETE', '/api/v1/api-keys/nope', { token: account.token })
      expect({ status: malformed.status, body: malformed.body }).toEqual({
        status: 400,
        body: { error: 'id must be an API key id (a UUID)' },
      })
    })

    test('validation: name required, unknown fields and bad include_revoked refused', async () => {
      const account = await signup(server)
      const cases: [unknown, string][] = [
        [{}, 'name is required and must be a non-empty string of at most 200 characters'],
        [{ name: '' }, 'name is required and must be a non-empty string of at most 200 characters'],
        [{ name: 5 }, 'name is required and must be a non-empty string of at most 200 characters'],
        [{ name: 'k', scope: 'all' }, 'unknown field: scope'],
      ]
      for (const [body, error] of cases) {
        const res = await server.call('POST', '/api/v1/api-keys', { token: account.token, body })
        expect({ status: res.status, body: res.body }).toEqual({ status: 400, body: { error } })
      }
      const bad = await server.call('GET', '/api/v1/api-keys?include_revoked=maybe', { token: account.token })
      expect({ status: bad.status, body: bad.body }).toEqual({
        status: 400,
        body: { error: 'include_revoked must be true or false' },
      })
    })
  })
}
