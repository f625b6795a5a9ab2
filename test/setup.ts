// Preloaded by bunfig.toml before every test file: a 30 s default test timeout (a test that times out
// has its child processes killed, shared PostgreSQL servers included), and the shared PostgreSQL
// servers stopped at the end. setDefaultTimeout here reaches the first test file only (bunfig's
// `timeout` is not read either), so `bun run test` also passes --timeout 30000.
import { afterAll, setDefaultTimeout } from 'bun:test'
import { stopSharedPostgres } from './support/postgres.ts'

setDefaultTimeout(30_000)

afterAll(async () => {
  await stopSharedPostgres()
})
