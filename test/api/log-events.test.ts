// GET /databases/{id}/log-events and /log-events/summary on both stores, from log_events sections as the
// agent sends them: every field back as sent, filters (kind, category, minimum severity, window, q with
// LIKE wildcards and quotes taken literally), the cursor walking every page once, query_hash resolved
// only for a statement dbm keeps, exact counts summed across batches (a replayed batch counts once, dropped
// entries are counted), the events timeline's entries for the important kinds, and the 400s and 404s.
import { describe, expect, test } from 'bun:test'
import { at, agentSession, pgBatch, range } from '../support/batches.ts'
import { logEntry, logSection } from '../support/log-events.ts'
import { storeKinds } from '../support/server.ts'

for (const kind of storeKinds) {
  describe(`log events (${kind})`, () => {
    const s = agentSession(kind)
    const window = range(at(-10), at(120))

    test('entries come back as sent, newest first, filtered, paged with a cursor; q is a literal substring', async () => {
      const name = `logs-${kind}`
      const hostile = 'it\'s 100% \\ bad_name */ \u202e\u0627\n"quoted"'
      const entries = [
        logEntry('error', at(0, 1), {
          severity: 'error',
          sqlstate: '23505',
          message: 'duplicate key value violates unique constraint "orders_pkey"',
          fingerprint: 'duplicate key value violates unique constraint ?',
          user: 'app',
          database: 'shop',
          application: 'web',
          client: '10.0.0.7:5432',
          detail: 'Key (id)=(?) already exists.',
          statement: 'INSERT INTO orders VALUES ($1)',
          query_id: '-123456789',
          fields: {},
        }),
        logEntry('auth_failed', at(0, 2), {
          severity: 'fatal',
          sqlstate: '28P01',
          message: 'password authentication failed for user "bob"',
          user: 'bob',
          client: '10.0.0.9',
          fields: { method: 'scram-sha-256' },
        }),
        logEntry('lock_wait', at(0, 3), {
          message: hostile,
          fields: { mode: 'ShareLock', wait_ms: 1000.5, holders: [77, 78] },
        }),
        logEntry('checkpoint', at(0, 4), {
          message: 'checkpoint complete: wrote 100 buffers',
          fields: { reason: 'wal', distance_bytes: 1_000_000 },
        }),
        logEntry('other', at(0, 5), { severity: 'warning', message: 'match 100%_percent' }),
        logEntry('other', at(0, 6), { severity: 'warning', message: 'match 1000xpercent' }),
      ]
      // a statement dbm keeps: its query_hash is the queryid
      const id = await s.ingest(
        pgBatch(name, at(0, 10), {
          query_stats: [
            {
              query_hash: '-123456789',
              query_text: 'INSERT INTO orders VALUES ($1)',
              calls: 1,
              total_time_ms: 1,
              rows: 1,
              shared_blks_hit: 0,
              shared_blks_read: 0,
            },
          ],
          log_events: logSection(entries),
        }),
      )
      const all = await s.ok(id, `/log-events?${window}`)
      expect(all.entries.map((e: any) => [e.kind, e.ts])).toEqual(
        entries.map((e) => [e.kind, new Date(e.ts).toISOString()]).reverse(),
      )
      expect(all.next_cursor).toBeNull()
      expect(all.dropped).toBe(0)
      const error = all.entries.find((e: any) => e.kind === 'error')
      expect({ ...error, id: 'x' }).toEqual({
        id: 'x',
        ts: new Date(at(0, 1)).toISOString(),
        kind: 'error',
        category: 'errors',
        severity: 'error',
        importance: 'error',
        sqlstate: '23505',
        message: 'duplicate key value violates unique constraint "orders_pkey"',
        fingerprint: 'duplicate key value violates unique constraint ?',
        pid: 4242,
        user: 'app',
        database: 'shop',
        application: 'web',
        client: '10.0.0.7:5432',
        detail: 'Key (id)=(?) already exists.',
        statement: 'INSERT INTO orders VALUES ($1)',
        query_id: '-123456789',
        query_hash: '-123456789',
        fields: {},
        count: 1,
      })
      const wait = all.entries.find((e: any) => e.kind === 'lock_wait')
      expect([wait.message, wait.fields, wait.query_hash, wait.category]).toEqual([
        hostile,
        { mode: 'ShareLock', wait_ms: 1000.5, holders: [77, 78] },
        null,
        'locks',
      ])

      const kinds = async (q: string) => (await s.ok(id, `/log-events?${window}&${q}`)).entries.map((e: any) => e.kind)
      expect(await kinds('kind=error,auth_failed')).toEqual(['auth_failed', 'error'])
      expect(await kinds('category=connections')).toEqual(['auth_failed'])
      expect(await kinds('category=locks,errors&kind=error,checkpoint')).toEqual(['error'])
      expect(await kinds('severity=error')).toEqual(['auth_failed', 'error'])
      // PostgreSQL's order: log ranks above warning (log_min_messages)
      expect(await kinds('severity=warning')).toEqual(['other', 'other', 'auth_failed', 'error'])
      // LOG ranks below NOTICE (routine information): checkpoints and lock waits come with severity=log
      expect(await kinds('severity=log')).toEqual(['other', 'other', 'checkpoint', 'lock_wait', 'auth_failed', 'error'])
      expect(await kinds('severity=fatal')).toEqual(['auth_failed'])
      // q: case-insensitive, in message, statement or detail; % and _ are themselves, quotes and backslashes too
      expect(await kinds(`q=${encodeURIComponent('100%_')}`)).toEqual(['other'])
      expect(await kinds(`q=${encodeURIComponent('%')}`)).toEqual(['other', 'lock_wait'])
      expect(await kinds(`q=${encodeURIComponent("IT'S 100% \\ BAD_")}`)).toEqual(['lock_wait'])
      expect(await kinds(`q=${encodeURIComponent('insert into')}`)).toEqual(['error'])
      expect(await kinds(`q=${encodeURIComponent('already EXISTS')}`)).toEqual(['error'])
      expect(await kinds(`q=${encodeURIComponent('"quoted"')}`)).toEqual(['lock_wait'])
      expect(
        await kinds(`since=${new Date(at(0, 3)).toISOString()}&until=${new Date(at(0, 5)).toISOString()}`),
      ).toEqual(['checkpoint', 'lock_wait'])

      // pages of 4, then 2: every entry once
      const first = await s.ok(id, `/log-events?${window}&limit=4`)
      expect(first.entries).toHaveLength(4)
      const second = await s.ok(id, `/log-events?${window}&limit=4&cursor=${first.next_cursor}`)
      expect(second.next_cursor).toBeNull()
      expect([...first.entries, ...second.entries]).toEqual(all.entries)
      // entries at the same millisecond are paged by id
      const same = Array.from({ length: 5 }, (_, i) => logEntry('other', at(1), { message: `same ${i}` }))
      await s.ingest(pgBatch(name, at(1, 10), { log_events: logSection(same) }))
      const seen: string[] = []
      let cursor: string | null = ''
      for (let pages = 0; cursor !== null && pages < 10; pages++) {
        const page: any = await s.ok(
          id,
          `/log-events?since=${new Date(at(1)).toISOString()}&until=${new Date(at(2)).toISOString()}&limit=2${cursor ? `&cursor=${cursor}` : ''}`,
        )
        seen.push(...page.entries.map((e: any) => e.message))
        cursor = page.next_cursor
      }
      expect(seen.sort()).toEqual(same.map((e) => e.message).sort())
    })

    test('the summary counts exactly, dropped entries included, across batches, a replayed batch once', async () => {
      const name = `log-counts-${kind}`
      const sent = [
        logEntry('error', at(2, 5), { severity: 'error' }),
        logEntry('auth_failed', at(2, 6), { severity: 'fatal' }),
      ]
      const droppedEntries = Array.from({ length: 37 }, (_, i) =>
        logEntry('auth_failed', at(2, 7 + (i % 50)), { severity: 'fatal' }),
      )
      const batch = pgBatch(name, at(3), { log_events: logSection(sent, droppedEntries) })
      const id = await s.ingest(batch)
      await s.ingest(batch) // replayed: acknowledged, not counted again
      const later = [
        logEntry('error', at(4, 1), { severity: 'error' }),
        logEntry('error', at(4, 2), { severity: 'fatal' }),
      ]
      await s.ingest(pgBatch(name, at(5), { log_events: logSection(later) }))
      const summary = await s.ok(id, `/log-events/summary?${range(at(0), at(10))}`)
      expect(summary).toEqual({
        from: new Date(at(0)).toISOString(),
        to: new Date(at(10)).toISOString(),
        bucket_seconds: 60,
        kinds: [
          {
            kind: 'auth_failed',
            category: 'connections',
            label: 'Authentication failed',
            total: 38,
            by_severity: { fatal: 38 },
          },
          { kind: 'error', category: 'errors', label: 'Error', total: 3, by_severity: { error: 2, fatal: 1 } },
        ],
        buckets: [
          { ts: new Date(at(2)).toISOString(), counts: { auth_failed: 38, error: 1 } },
          { ts: new Date(at(4)).toISOString(), counts: { error: 2 } },
        ],
        total: 41,
      })
      const tenMinutes = await s.ok(id, `/log-events/summary?${range(at(0), at(10))}&bucket=600`)
      expect([tenMinutes.bucket_seconds, tenMinutes.buckets.map((b: any) => b.counts), tenMinutes.total]).toEqual([
        600,
        [{ auth_failed: 38, error: 3 }],
        41,
      ])
      const list = await s.ok(id, `/log-events?${range(at(0), at(10))}`)
      expect([list.entries.length, list.dropped]).toEqual([4, 37])
      expect(await s.rowCount('log_entries', id)).toBe(4)
    })

    test('the summary takes the list filters; severity filters match importance: an archive failure logged at LOG is an error', async () => {
      const name = `log-filters-${kind}`
      const entries = [
        ...Array.from({ length: 3 }, (_, i) =>
          logEntry('archive_failed', at(8, i), {
            severity: 'log',
            message: 'archive command failed with exit code 7',
            fields: { exit_code: 7 },
          }),
        ),
        logEntry('error', at(8, 10), { severity: 'error' }),
        logEntry('checkpoint', at(8, 11), { severity: 'log' }),
        logEntry('other', at(8, 12), { severity: 'warning' }),
      ]
      // 5 archive failures counted but not sent whole: still counted under their kind and severity
      const dropped = Array.from({ length: 5 }, (_, i) =>
        logEntry('archive_failed', at(8, 20 + i), { severity: 'log' }),
      )
      const id = await s.ingest(pgBatch(name, at(9), { log_events: logSection(entries, dropped) }))
      const win = range(at(8), at(9))
      const counted = async (q: string) => {
        const summary = await s.ok(id, `/log-events/summary?${win}&${q}`)
        return [summary.total, Object.fromEntries(summary.kinds.map((k: any) => [k.kind, k.total]))]
      }
      const listed = async (q: string) =>
        (await s.ok(id, `/log-events?${win}&${q}`)).entries.map((e: any) => [e.kind, e.severity, e.importance])
      expect(await counted('severity=warning')).toEqual([10, { archive_failed: 8, error: 1, other: 1 }])
      expect(await listed('severity=warning')).toEqual([
        ['other', 'warning', 'warning'],
        ['error', 'error', 'error'],
        ...Array(3).fill(['archive_failed', 'log', 'error']),
      ])
      expect(await counted('severity=error')).toEqual([9, { archive_failed: 8, error: 1 }])
      expect(await counted('severity=fatal')).toEqual([0, {}])
      expect(await counted('category=archive')).toEqual([8, { archive_failed: 8 }])
      expect(await counted('kind=checkpoint,other')).toEqual([2, { checkpoint: 1, other: 1 }])
      expect(await counted('kind=checkpoint&severity=warning')).toEqual([0, {}])
      expect((await s.ok(id, `/log-events/summary?${win}&kind=archive_failed`)).kinds[0].by_severity).toEqual({
        log: 8,
      })
      const bad = await s.get(id, '/log-events/summary?severity=loud')
      expect([bad.status, String(bad.body.error).startsWith('severity must be one of')]).toEqual([400, true])
    })

    test('crash, out-of-memory and archive failures reach the events timeline; a burst is one event', async () => {
      const name = `log-timeline-${kind}`
      const oom = Array.from({ length: 8 }, (_, i) =>
        logEntry('out_of_memory', at(6, i), { severity: 'error', message: 'out of memory <script>' }),
      )
      const id = await s.ingest(
        pgBatch(name, at(7), {
          log_events: logSection([
            logEntry('server_crash', at(6, 30), {
              severity: 'log',
              message: 'server process (PID 77) was terminated by signal 9: Killed',
              pid: 1,
            }),
            logEntry('archive_failed', at(6, 40), {
              severity: 'warning',
              message: 'archive command failed with exit code 1',
              fields: { exit_code: 1, wal_file: '000000010000000000000003' },
            }),
            logEntry('error', at(6, 50), { severity: 'error' }),
            ...oom,
          ]),
        }),
      )
      const events = (await s.ok(id, `/events?${range(at(0), at(30))}`)).filter((e: any) => e.kind === 'log_event')
      expect(events.map((e: any) => [e.ts, e.severity, e.title])).toEqual([
        // critical, as pg_archiver_failing judges the same failure
        [
          new Date(at(6, 40)).toISOString(),
          'critical',
          'Archive command failed: archive command failed with exit code 1',
        ],
        [
          new Date(at(6, 30)).toISOString(),
          'critical',
          'Server crash: server process (PID 77) was terminated by signal 9: Killed',
        ],
        [
          new Date(at(6)).toISOString(),
          'critical',
          'Out of memory: 8 entries in one minute, the first: out of memory <script>',
        ],
      ])
    })

    test('bad parameters are 400s naming them; another organization gets a 404', async () => {
      const id = await s.ingest(
        pgBatch(`log-errors-${kind}`, at(0), {
          log_events: logSection([logEntry('error', at(0), { severity: 'error' })]),
        }),
      )
      const bad: [string, string][] = [
        ['/log-events?kind=nope', 'kind: unknown value "nope"'],
        ['/log-events?kind=,', 'kind must name at least one of'],
        ['/log-events?category=bogus', 'category: unknown value "bogus"'],
        ['/log-events?severity=loud', 'severity must be one of: debug, info'],
        ['/log-events?cursor=abc', 'cursor must be the next_cursor of a previous page'],
        [
          `/log-events?cursor=${Buffer.from('["x","y"]').toString('base64url')}`,
          'cursor must be the next_cursor of a previous page',
        ],
        [`/log-events?q=${'x'.repeat(201)}`, 'q must be a text of at most 200 characters'],
        ['/log-events?q=a%00b', 'the URL must not contain NUL characters'],
        ['/log-events?limit=0', 'limit must be a whole number from 1'],
        ['/log-events?since=yesterday', 'since must be an RFC 3339 timestamp'],
        ['/log-events/summary?bucket=90', 'bucket must be a multiple of 60 seconds'],
        ['/log-events/summary?bucket=abc', 'bucket must be a whole number of seconds'],
        [
          `/log-events/summary?${range(Date.parse('2026-01-01T00:00:00Z'), Date.parse('2026-01-31T00:00:00Z'))}&bucket=60`,
          'bucket must be a multiple of 3600 seconds',
        ],
      ]
      for (const [path, error] of bad) {
        const res = await s.get(id, path)
        expect({ path, status: res.status, starts: String(res.body?.error).startsWith(error) || res.body }).toEqual({
          path,
          status: 400,
          starts: true,
        })
      }
      // over the maximum: clamped
      expect((await s.ok(id, `/log-events?${window}&limit=100000`)).entries).toHaveLength(1)
      await s.expectHiddenFromOtherOrganizations(id, ['/log-events', '/log-events/summary'])
    })

    test('both routes are in the OpenAPI document with their parameters and answers', async () => {
      const doc = (await s.server.call('GET', '/api/v1/openapi.json')).body
      const list = doc.paths['/api/v1/databases/{id}/log-events'].get
      expect(list.parameters.map((p: any) => p.name).sort()).toEqual([
        'category',
        'cursor',
        'id',
        'kind',
        'limit',
        'q',
        'severity',
        'since',
        'until',
      ])
      expect(list.responses['200'].content['application/json'].schema).toEqual({
        $ref: '#/components/schemas/LogEventList',
      })
      const summary = doc.paths['/api/v1/databases/{id}/log-events/summary'].get
      expect(summary.responses['200'].content['application/json'].schema).toEqual({
        $ref: '#/components/schemas/LogEventSummary',
      })
      expect(summary.parameters.map((p: any) => p.name).sort()).toEqual([
        'bucket',
        'category',
        'id',
        'kind',
        'severity',
        'since',
        'until',
      ])
      expect(Object.keys(doc.components.schemas)).toContain('LogEvent')
    })
  })
}
