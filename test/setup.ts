// Preloaded by bunfig.toml before every test file: stops the shared PostgreSQL servers at the end.
import { afterAll } from 'bun:test'
import { stopSharedPostgres } from './support/postgres.ts'

afterAll(async () => {
  await stopSharedPostgres()
})
