// The actions store (actions/) on SQLite and PostgreSQL: an action is handed out once even when two
// serve processes share one PostgreSQL store and claim at the same moment; a pending one past its expiry
// is never handed out and reads as expired; a result is taken once, only for a running action of the
// caller's organization; what the agent allows is recorded from the database's own agent key only. A database holds at most the cap of pending
// actions, also when two processes ask at once; retention deletes the actions that are over.
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
      const account = await a.createAccount({
        org: { name: 'Org', slug: `org-${Math.random()}`, plan: 'free' },
        user: { email: `a${Math.random()}@example.com`, name: 'A', passwordHash: 'h', role: 'owner' },
      })
      const other = await a.createAccount({
        org: { name: 'Other', slug: `other-${Math.random()}`, plan: 'free' },
        user: { email: `b${Math.random()}@example.com`, name: 'B', passwordHash: 'h', role: 'owner' },
      })
      orgId = account.org.id
      otherOrg = other.org.id
      const db = await a.createDatabase(
        orgId,
        { name: 'pg', engine: 'postgres', engine_version: '17', host: 'h', port: 5432, tags: {} },
        T0,
      )
      if (db === 'limit') throw new Error('limit')
      dbId = db.id
    })
    afterAll(async () => {
      if (b !== a) await b?.close()
      await a?.close()
      cleanup()
    })

    const action = (id: string, at: number, databaseId = dbId) => ({
      id,
      org_id: orgId,
      database_id: databaseId,
      kind: 'cancel' as const,
      request: {
        session: { pid: 7, backend_start: T0, xact_start: null, query_start: null, user: 'u', application_name: 'x' },
      },
      requested_by: 'a@example.com',
      requested_at: at,
      expires_at: at + 120_000,
    })
    const ask = async (id: string, at: number) => {
      const admission = await a.actions.createAction(action(id, at), 20)
      if (!('created' in admission)) throw new Error('refused')
      return admission.created
    }

    test('two claims at once: the action is handed out once', async () => {
      const id = crypto.randomUUID()
      await ask(id, T0)
      expect(await a.actions.pendingActions(dbId, T0 + 1)).toBe(1)
      const [one, two] = await Promise.all([
        a.actions.claimActions(dbId, T0 + 1, 10),
        b.actions.claimActions(dbId, T0 + 1, 10),
      ])
      expect([...one, ...two].map((x) => x.id)).toEqual([id])
      expect([...one, ...two][0]!.state).toBe('running')
      expect(await a.actions.pendingActions(dbId, T0 + 1)).toBe(0)
      // The result once, for the organization's running action only.
      expect(await b.actions.finishAction(otherOrg, id, { outcome: 'done', signalled: true }, T0 + 2)).toBeUndefined()
      const done = await b.actions.finishAction(orgId, id, { outcome: 'done', signalled: true }, T0 + 2)
      expect(done?.state).toBe('done')
      expect(done?.result).toEqual({ outcome: 'done', signalled: true })
      expect(await a.actions.finishAction(orgId, id, { outcome: 'failed', reason: 'late' }, T0 + 3)).toBeUndefined()
      expect(await a.actions.getAction(otherOrg, dbId, id, T0 + 3)).toBeUndefined()
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

    test('kills are handed out before explains asked earlier; a result after the expiry is kept as expired', async () => {
      const db = await a.createDatabase(
        orgId,
        { name: 'ordered', engine: 'postgres', engine_version: '17', host: 'h', port: 5432, tags: {} },
        T0,
      )
      if (db === 'limit') throw new Error('limit')
      const at = T0 + 5_000_000
      const explains = [crypto.randomUUID(), crypto.randomUUID()]
      for (const [i, id] of explains.entries()) {
        await a.actions.createAction(
          { ...action(id, at + i, db.id), kind: 'explain', request: { query_hash: '1', parameters: [] } },
          20,
        )
      }
      const kill = crypto.randomUUID()
      await a.actions.createAction(action(kill, at + 5, db.id), 20)
      // One at a time: the kill, asked last, comes first.
      expect((await b.actions.claimActions(db.id, at + 10, 1)).map((x) => x.id)).toEqual([kill])
      expect((await b.actions.claimActions(db.id, at + 10, 5)).map((x) => x.id)).toEqual(explains)
      // In time: done. 1.5 s after the expiry: expired, the agent's outcome kept beside it.
      expect(
        (await a.actions.finishAction(orgId, explains[0]!, { outcome: 'done', plan: { Plan: {} } }, at + 120_000))
          ?.state,
      ).toBe('done')
      const late = await a.actions.finishAction(
        orgId,
        kill,
        { outcome: 'done', signalled: true },
        at + 5 + 120_000 + 1_500,
      )
      expect(late?.state).toBe('expired')
      expect(late?.result).toEqual({
        outcome: 'expired',
        signalled: true,
        agent_outcome: 'done',
        late_by_ms: 1_500,
        reason:
          "the agent's result came 1.5 s after the action expired, so it is not counted as run in time; the agent reported: the backend was signalled",
      })
    })

    test("what the agent allows is heard from the database's own agent key only; another takes over once it is silent", async () => {
      const silence = 120_000
      expect(await a.actions.actionListener(dbId)).toBeUndefined()
      expect(await b.actions.heardListener(dbId, 'k1', ['cancel', 'explain'], T0, T0 - silence)).toEqual({
        own: true,
        took_over_from: null,
      })
      // Another key of the organization: nothing recorded.
      expect(
        await a.actions.heardListener(dbId, 'k2', ['cancel', 'terminate', 'explain'], T0 + 1, T0 + 1 - silence),
      ).toEqual({ own: false, agent_key_id: 'k1', heard_at: T0 })
      await b.actions.heardListener(dbId, 'k1', ['explain'], T0 + 5, T0 + 5 - silence)
      expect(await a.actions.actionListener(dbId)).toEqual({
        allowed: ['explain'],
        heard_at: T0 + 5,
        agent_key_id: 'k1',
      })
      // k1 silent for longer than that: k2 is the agent's key from now on.
      const later = T0 + 5 + silence + 1
      expect(await a.actions.heardListener(dbId, 'k2', ['cancel'], later, later - silence)).toEqual({
        own: true,
        took_over_from: 'k1',
      })
      expect(await b.actions.actionListener(dbId)).toEqual({ allowed: ['cancel'], heard_at: later, agent_key_id: 'k2' })
      expect((await b.actions.heardListener(dbId, 'k1', ['explain'], later + 1, later + 1 - silence)).own).toBe(false)
    })

    test('at most the cap pending per database, also asked from two processes at once; taken or expired ones make room', async () => {
      const db = await a.createDatabase(
        orgId,
        { name: 'capped', engine: 'postgres', engine_version: '17', host: 'h', port: 5432, tags: {} },
        T0,
      )
      if (db === 'limit') throw new Error('limit')
      const at = T0 + 1_000_000
      const asked = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          (i % 2 === 0 ? a : b).actions.createAction(action(crypto.randomUUID(), at + i, db.id), 5),
        ),
      )
      expect(asked.filter((x) => 'created' in x)).toHaveLength(5)
      const refused = asked.filter((x) => 'full' in x)
      expect(refused).toHaveLength(3)
      // The first to expire is the first asked of those taken (the eight race, so which five are taken varies).
      const firstTaken = asked.findIndex((x) => 'created' in x)
      for (const r of refused)
        expect(r).toEqual({ full: { class: 'kill', pending: 5, next_expiry: at + firstTaken + 120_000 } })
      // Explains wait apart: the kills leave them their room.
      expect(
        'created' in
          (await a.actions.createAction(
            { ...action(crypto.randomUUID(), at, db.id), kind: 'explain', request: { query_hash: '1' } },
            5,
          )),
      ).toBe(true)
      expect(await a.actions.pendingActions(db.id, at + 10)).toBe(6)
      // Another database of the organization has its own room.
      expect('created' in (await a.actions.createAction(action(crypto.randomUUID(), at, dbId), 5))).toBe(true)
      // One taken by the agent: room for one.
      expect(await b.actions.claimActions(db.id, at + 10, 1)).toHaveLength(1)
      expect('created' in (await a.actions.createAction(action(crypto.randomUUID(), at + 20, db.id), 5))).toBe(true)
      expect('full' in (await a.actions.createAction(action(crypto.randomUUID(), at + 21, db.id), 5))).toBe(true)
      // Once expired they count no more.
      expect('created' in (await a.actions.createAction(action(crypto.randomUUID(), at + 120_020, db.id), 5))).toBe(
        true,
      )
    })

    test('retention deletes the actions asked before the cutoff that are over, and keeps the rest', async () => {
      const db = await a.createDatabase(
        orgId,
        { name: 'swept', engine: 'postgres', engine_version: '17', host: 'h', port: 5432, tags: {} },
        T0,
      )
      if (db === 'limit') throw new Error('limit')
      const put = async (at: number) => {
        const admission = await a.actions.createAction(action(crypto.randomUUID(), at, db.id), 20)
        if (!('created' in admission)) throw new Error('refused')
        return admission.created.id
      }
      const DAY = 86_400_000
      // Old ones: one done, one left running, one left pending (both long past their expiry).
      const done = await put(T0)
      await put(T0 + 1)
      await put(T0 + 2)
      expect((await a.actions.claimActions(db.id, T0 + 10, 2)).map((x) => x.id)[0]).toBe(done)
      await a.actions.finishAction(orgId, done, { outcome: 'done', signalled: true }, T0 + 20)
      const recent = await put(T0 + 2 * DAY)
      const cutoff = T0 + DAY
      const { retentionStore } = await import('../../src/server/store/retention/retention.ts')
      const retention = retentionStore(a.driver)
      await retention.sweepDatabase(db.id, { before: cutoff, minutesBefore: cutoff, rollUpTo: cutoff }, 2)
      const left = await a.actions.listActions(db.id, 20, cutoff + 2 * DAY)
      expect(left.map((x) => x.id)).toEqual([recent])
      // A cutoff within a running action's grace past its expiry keeps it (it is not over yet); the pending
      // one expired before it goes.
      const running = await put(T0 + 3 * DAY)
      expect((await a.actions.claimActions(db.id, T0 + 3 * DAY + 1, 5)).map((x) => x.id)).toEqual([running])
      await retention.sweepDatabase(
        db.id,
        { before: T0 + 3 * DAY + 150_000, minutesBefore: cutoff, rollUpTo: cutoff },
        2,
      )
      expect((await a.actions.listActions(db.id, 20, T0 + 3 * DAY)).map((x) => x.id)).toEqual([running])
    })
  })
}
