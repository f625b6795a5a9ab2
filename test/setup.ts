// Preloaded by bunfig.toml before every test file: a 30 s default test timeout (a test that times out
// has its child processes killed, shared PostgreSQL servers included), and the shared PostgreSQL
// servers stopped at the end.
import { afterAll, setDefaultTimeout } from 'bun:test'
import { stopSharedPostgres } from './support/postgres.ts'

setDefaultTimeout(30_000)

afterAll(async () => {
  await stopSharedPostgres()
})
