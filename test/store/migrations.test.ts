// Schema migrations on both stores: the first open applies every version, a reopen applies none, a
// schema newer than this dbm refuses to open with SchemaTooNewError; the SQLite file runs in WAL mode.
import { Database } from 'bun:sqlite'
import { afterEach, describe, expect, test } from 'bun:test'
import { join } from 'node:path'
import postgres from 'postgres'
import { SchemaTooNewError, latestVersion, migrations } from '../../src/server/store/migrations.ts'
import { openStore } from '../../src/server/store/open.ts'
import { freshStoreLocation, storeKinds } from '../support/server.ts'
import type { StoreLocation } from './contract.ts'

/** Runs one statement on the store's database over a connection of its own, outside dbm. */
async function rawQuery(location: StoreLocation, sql: string): Promise<Record<string, unknown>[]> {
  if (location.databaseUrl) {
    const client = postgres(location.databaseUrl, { max: 1, onnotice: () => {} })
    try {
      return [...(await client.unsafe(sql))]
    } finally {
      await client.end()
    }
  }
  const db = new Database(join(location.dataDir, 'dbm.sqlite'))
  try {
    return db.query(sql).all() as Record<string, unknown>[]
  } finally {
    db.close()
  }
}

for (const kind of storeKinds) {
  describe(`migrations (${kind})`, () => {
    const cleanups: Array<() => void> = []
    afterEach(() => {
      for (const cleanup of cleanups.splice(0)) cleanup()
    })
    const location = async () => {
      const l = await freshStoreLocation(kind)
      cleanups.push(l.cleanup)
      return l
    }

    test('the versions run from 1 to latestVersion without gaps', () => {
      expect(migrations.map((m) => m.version)).toEqual(Array.from({ length: latestVersion }, (_, i) => i + 1))
    })

    test('the first open applies every migration, a second open applies none', async () => {
      const where = await location()
      const first = await openStore(where)
      expect(first.applied).toEqual(migrations.map((m) => m.version))
      await first.store.close()

      const second = await openStore(where)
      expect(second.applied).toEqual([])
      await second.store.close()

      const rows = await rawQuery(where, 'SELECT version, name FROM schema_migrations ORDER BY version')
      expect(rows.map((r) => ({ version: Number(r.version), name: r.name }))).toEqual(
        migrations.map((m) => ({ version: m.version, name: m.name })),
      )
    })

    test('the location names the data without credentials', async () => {
      const where = await location()
      const opened = await openStore(where)
      await opened.store.close()
      if (kind === 'sqlite') {
        expect(opened.location).toBe(join(where.dataDir, 'dbm.sqlite'))
      } else {
        const url = new URL(where.databaseUrl!)
        expect(opened.location).toBe(`postgres://postgres:***@${url.host}${url.pathname}`)
      }
    })

    test('a schema newer than this dbm refuses to open with SchemaTooNewError', async () => {
      const where = await location()
      await (await openStore(where)).store.close()
      const future = latestVersion + 1
      await rawQuery(where, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (${future}, 'from the future', 0)`)

      const error = await openStore(where).then(
        () => undefined,
        (e) => e,
      )
      expect(error).toBeInstanceOf(SchemaTooNewError)
      expect(error.message).toBe(
        `the store's schema is version ${future}, but this dbm knows versions up to ${latestVersion}: ` +
          'upgrade dbm (or point it at another data directory / database URL)',
      )
      // the refused open changed nothing
      const rows = await rawQuery(where, 'SELECT MAX(version) AS v FROM schema_migrations')
      expect(Number(rows[0]?.v)).toBe(future)
    })

    // Two dbm processes starting at once on one PostgreSQL store; a single process cannot race two
    // connections on one SQLite file (the second BEGIN IMMEDIATE blocks the only thread).
    test.skipIf(kind === 'sqlite')('concurrent first opens apply the migrations once (PostgreSQL only)', async () => {
      const where = await location()
      const opened = await Promise.all([openStore(where), openStore(where), openStore(where)])
      expect(opened.map((o) => o.applied).sort((a, b) => b.length - a.length)).toEqual([
        migrations.map((m) => m.version),
        [],
        [],
      ])
      await Promise.all(opened.map((o) => o.store.close()))
    })

    test.skipIf(kind === 'postgres')('the SQLite file is in WAL mode (SQLite only)', async () => {
      const where = await location()
      const { store } = await openStore(where)
      expect(await store.driver.get('PRAGMA journal_mode')).toEqual({ journal_mode: 'wal' })
      await store.close()
      // WAL is a property of the file: a connection of its own sees it too
      expect(await rawQuery(where, 'PRAGMA journal_mode')).toEqual([{ journal_mode: 'wal' }])
    })
  })
}
