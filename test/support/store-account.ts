// A store of either kind opened as `dbm serve` opens it (openStore), with one organization, for the
// describe block that calls storeAccount: opened before its tests and closed after them. The store-level
// ingest tests share it: `ingest(batch)` applies a batch as the organization's agent would (at
// collected_at + 1 s unless told) and answers the database's id.
import { afterAll, beforeAll } from 'bun:test'
import { openStore } from '../../src/server/store/open.ts'
import type { SqlStore } from '../../src/server/store/sql-store.ts'
import type { IngestBatch } from '../../src/shared/wire.ts'
import { type StoreKind, freshStoreLocation } from './server.ts'

export interface StoreAccount {
  readonly store: SqlStore
  readonly orgId: string
  ingest(batch: IngestBatch, now?: number): Promise<string>
}

export function storeAccount(kind: StoreKind, name: string): StoreAccount {
  let store: SqlStore | undefined
  let orgId = ''
  let cleanup = () => {}
  beforeAll(async () => {
    const location = await freshStoreLocation(kind)
    cleanup = location.cleanup
    store = (await openStore(location)).store
    const slug = `${name.toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${kind}-${Date.now()}`
    const { org } = await store.createAccount({
      org: { name, slug, plan: 'free' },
      user: { email: `${slug}@example.com`, name: 'Ada', passwordHash: 'hash', role: 'owner' },
    })
    orgId = org.id
  })
  afterAll(async () => {
    await store?.close()
    cleanup()
  })
  return {
    get store() {
      if (!store) throw new Error('the store opens in beforeAll')
      return store
    },
    get orgId() {
      return orgId
    },
    async ingest(batch, now = batch.collected_at + 1_000) {
      // (sent as it arrives, by a clock in time with the server's: X-Dbm-Sent-At)
      const result = await store!.ingest(orgId, batch, now, undefined, 0, now)
      if (result.kind !== 'applied') throw new Error(`ingest: ${result.kind}`)
      return result.database.id
    },
  }
}
