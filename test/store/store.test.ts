// Runs the store contract (test/store/contract.ts) against both backends: embedded SQLite, a real
// PostgreSQL 17 database as the test server creates it (C.UTF-8), and one whose default collation is
// ICU en-US, as on most production servers, so that results do not depend on the server's locale.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { sharedPostgres } from '../support/postgres.ts'
import { type StoreLocation, storeContract } from './contract.ts'

let icuDatabases = 0
async function icuPostgresLocation(): Promise<StoreLocation> {
  const server = await sharedPostgres()
  const name = `t_icu_${process.pid}_${++icuDatabases}`
  const admin = postgres(server.url(), { max: 1, onnotice: () => {} })
  try {
    await admin.unsafe(
      `CREATE DATABASE ${name} TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'`,
    )
  } finally {
    await admin.end()
  }
  const dataDir = mkdtempSync(join(tmpdir(), 'dbm-test-'))
  return { dataDir, databaseUrl: server.url(name), cleanup: () => rmSync(dataDir, { recursive: true, force: true }) }
}

storeContract('sqlite')
storeContract('postgres')
storeContract('postgres', { label: 'en-US collation', location: icuPostgresLocation })
