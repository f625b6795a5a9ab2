// The actions store (sql-actions.ts) on SQLite and PostgreSQL: an action is handed out once even when two
// serve processes share one PostgreSQL store and claim at the same moment; a pending one past its expiry
// is never handed out and reads as expired; a result is taken once, only for a running action of the
// caller's organization; what the agent allows round-trips.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { openStore } from '../../src/server/store/open.ts'
import type { SqlStore } from '../../src/server/store/sql-store.ts'
import { type StoreKind, freshStoreLocation, storeKinds } from '../support/server.ts'

const T0 = Date.UTC(2026, 10, 1)

for (const kind of storeKinds as StoreKind[]) {
  describe(`actions store (${kind})`, () => {
    let a: SqlStore
    let b: SqlStore
    let cleanup = () => {}
    let orgId = ''
    let otherOrg = ''
    let dbId = ''

    beforeAll(async () => {
      const location = await freshStoreLocation(kind)
      cleanup = location.cleanup
      a = (await openStore(location)).store
      // PostgreSQL: a second process's store on the same database; SQLite: the file is one process's own.
      b = kind === 'postgres' ? (await openStore(location)).store : a
      const account = await a.createAccount({ org: { name: 'Org', slug: `org-${Math.random()}`, plan: 'free' }, user: { email: `a${Math.random()}@example.com`, name: 'A', passwordHash: 'h', role: 'owner' } })
      const other = await a.createAccount({ org: { name: 'Other', slug: `other-${Math.random()}`, plan: 'free' }, user: { email: `b${Math.random()}@example.com`, name: 'B', passwordHash: 'h', role: 'owner' } })
      orgId = account.org.id
      otherOrg = other.org.id
      const db = await a.createDatabase(orgId, { name: 'pg', engine: 'postgres', engine_version: '17', host: 'h', port: 5432, tags: {} }, T0)
      if (db === 'limit') throw new Error('limit')
      dbId = db.id
    })
    afterAll(async () => {
      if (b !== a) await b?.close()
      await a?.close()
      cleanup()
    })

    const ask = (id: string, at: number) =>
      a.actions.createAction({ id, org_id: orgId, database_id: dbId, kind: 'cancel', request: { session: { pid: 7, backend_start: T0, xact_start: null, query_start: null, user: 'u', application_name: 'x' } }, requested_by: 'a@example.com', requested_at: at, expires_at: at + 120_000 })

    test('two claims at once: the action is handed out once', async () => {
      const id = crypto.randomUUID()
      await ask(id, T0)
      expect(await a.actions.pendingActions(dbId, T0 + 1)).toBe(1)
      const [one, two] = await Promise.all([a.actions.claimActions(dbId, T0 + 1, 10), b.actions.claimActions(dbId, T0 + 1, 10)])
      expect([...one, ...two].map((x) => x.id)).toEqual([id])
      expect([...one, ...two][0]!.state).toBe('running')
      expect(await a.actions.pendingActions(dbId, T0 + 1)).toBe(0)
      // The result once, for the organization's running action only.
      expect(await b.actions.finishAction(otherOrg, id, { outcome: 'done', signalled: true }, T0 + 2)).toBeUndefined()
      const done = await b.actions.finishAction(orgId, id, { outcome: 'done', signalled: true }, T0 + 2)
      expect(done?.state).toBe('done')
      expect(done?.result).toEqual({ outcome: 'done', signalled: true })
      expect(await a.actions.finishAction(orgId, id, { outcome: 'failed', reason: 'late' }, T0 + 3)).toBeUndefined()
      expect((await a.actions.getAction(otherOrg, dbId, id, T0 + 3))).toBeUndefined()
    })

    test('past its expiry a pending action is not handed out and reads as expired', async () => {
      const id = crypto.randomUUID()
      await ask(id, T0 + 10_000)
      const late = T0 + 10_000 + 120_000
      expect(await b.actions.claimActions(dbId, late, 10)).toEqual([])
      expect((await a.actions.getAction(orgId, dbId, id, late))?.state).toBe('expired')
      const swept = await b.actions.expireActions(dbId, late)
      expect(swept.map((x) => [x.id, x.state])).toEqual([[id, 'expired']])
      expect(await b.actions.expireActions(dbId, late)).toEqual([])
    })

    test('what the agent allows round-trips', async () => {
      expect(await a.actions.actionListener(dbId)).toBeUndefined()
      await b.actions.heardListener(dbId, ['cancel', 'explain'], T0)
      await b.actions.heardListener(dbId, ['explain'], T0 + 5)
      expect(await a.actions.actionListener(dbId)).toEqual({ allowed: ['explain'], heard_at: T0 + 5 })
    })
  })
}
