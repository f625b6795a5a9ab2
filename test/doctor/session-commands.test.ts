// What the doctor's end and cancel commands (src/server/doctor/session-commands.ts) match on real
// PostgreSQL, the oldest supported major (extract() gives a double there) and 17 (a numeric): the
// agent's millisecond times, truncated or rounded from PostgreSQL's microseconds, match the session
// they came from, and a millisecond further they match nothing; a report with only the pid keeps out a
// backend that started after the report was taken. The commands' WHERE is run with `SELECT pid` in
// place of the kill, so nothing is ended here; the rule tests run the commands as given
// (postgres-sessions.test.ts, postgres-xmin-causes.test.ts).
import { afterAll, describe, expect, test } from 'bun:test'
import postgres from 'postgres'
import { type ReportedSession, cancelStatement, terminateSession } from '../../src/shared/session-commands.ts'
import { sharedPostgres } from '../support/postgres.ts'

const clients: postgres.Sql[] = []
afterAll(async () => {
  await Promise.all(clients.map((c) => c.end({ timeout: 1 }).catch(() => {})))
})

/** The command's query with `SELECT pid` in place of the kill: which backends it would act on. */
async function matched(sql: postgres.Sql, command: string): Promise<number[]> {
  const query = command
    .split(';   -- ')[0]!
    .replace(/^SELECT pg_(terminate|cancel)_backend\(pid\) FROM/, 'SELECT pid FROM')
  expect(query).toStartWith('SELECT pid FROM pg_stat_activity WHERE ')
  return (await sql.unsafe<{ pid: number }[]>(query)).map((r) => r.pid)
}

for (const major of [13, 17] as const) {
  describe(`PostgreSQL ${major}`, () => {
    test('the reported session matches from truncated or rounded milliseconds, and nothing a millisecond beyond', async () => {
      const url = await (await sharedPostgres(major)).freshDatabase()
      const admin = postgres(url, { max: 1, onnotice: () => {} })
      const session = postgres(url, {
        max: 1,
        onnotice: () => {},
        connection: { application_name: "it's a \\ test */" },
      })
      clients.push(admin, session)
      await session`BEGIN`
      await session`SELECT 1 AS reported`
      const pid = (await session<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`)[0]!.pid
      // The times to the microsecond, as PostgreSQL keeps them.
      const [row] = await admin<
        { usename: string; application_name: string; backend_us: string; xact_us: string; query_us: string }[]
      >`
        SELECT usename, application_name,
               (extract(epoch FROM backend_start) * 1000000)::bigint::text AS backend_us,
               (extract(epoch FROM xact_start) * 1000000)::bigint::text AS xact_us,
               (extract(epoch FROM query_start) * 1000000)::bigint::text AS query_us
        FROM pg_stat_activity WHERE pid = ${pid}`
      const us = {
        backend_start: BigInt(row!.backend_us),
        xact_start: BigInt(row!.xact_us),
        query_start: BigInt(row!.query_us),
      }
      const truncated = (t: bigint) => Number(t / 1000n)
      const rounded = (t: bigint) => Number((t + 500n) / 1000n)
      const report = (ms: (t: bigint) => number, shift = 0): ReportedSession => ({
        pid,
        user: row!.usename,
        application_name: row!.application_name,
        backend_start: ms(us.backend_start) + shift,
        xact_start: ms(us.xact_start) + shift,
        query_start: ms(us.query_start) + shift,
      })
      const effect = 'test'
      for (const ms of [truncated, rounded]) {
        expect(await matched(admin, terminateSession(report(ms), { effect }))).toEqual([pid])
        expect(await matched(admin, cancelStatement(report(ms), { effect }))).toEqual([pid])
        for (const shift of [-2, 2]) {
          expect(await matched(admin, terminateSession(report(ms, shift), { effect }))).toEqual([])
          // Only the transaction's start off: the session's start alone does not match it.
          expect(
            await matched(
              admin,
              terminateSession({ ...report(ms), xact_start: ms(us.xact_start) + shift }, { effect }),
            ),
          ).toEqual([])
        }
      }
      // Another role or application name: not that session.
      expect(
        await matched(admin, terminateSession({ ...report(truncated), application_name: 'other' }, { effect })),
      ).toEqual([])

      // Only the pid known (a blocker outside the activity snapshot): a backend that started after the report is left out.
      const startedMs = truncated(us.backend_start)
      const after = terminateSession({ pid }, { seenAt: startedMs + 5_000, effect })
      expect(after).toEndWith(
        "-- test; returns no row if that session has already ended (its start was not reported: any backend of that pid that started before dbm's report, by the agent's clock, matches); run it as a superuser, a member of pg_read_all_stats or the session's own role (to others its start times are hidden, and it finds no row)",
      )
      expect(await matched(admin, after)).toEqual([pid])
      expect(await matched(admin, terminateSession({ pid }, { seenAt: startedMs - 1_000, effect }))).toEqual([])
      await session`ROLLBACK`
    })
  })
}
