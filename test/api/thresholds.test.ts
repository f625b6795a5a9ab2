// The doctor's thresholds per database (issue 32), on both stores: GET lists each rule's defaults and
// ranges, PUT sets some keys (null: back to the default), DELETE takes them all away; owners and admin
// keys write, members and read keys read; an unknown rule or key, a value out of range or of the wrong
// kind, and a warning past its critical are 400s naming them, storing nothing; another organization's
// database is 404. A real diagnosis follows them: a prepared transaction pending 10 minutes is a finding
// at the default 5 minutes and not at 15, and a superuser named in allowed_names is no longer one; the
// stored diagnosis is stale from the change on (doctor/current.ts's basis).
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { IngestBatch, SecurityStatus, XminHolder } from '../../src/shared/wire.ts'
import { pgBatch } from '../support/batches.ts'
import {
  type Account,
  type TestServer,
  agentAccount,
  createApiKey,
  inviteMember,
  signup,
  startTestServer,
  storeKinds,
} from '../support/server.ts'

const MINUTE = 60_000

const security: SecurityStatus = {
  password_encryption: 'scram-sha-256',
  ssl: 'on',
  listen_addresses: 'localhost',
  data_checksums: 'on',
  roles: [
    { name: 'postgres', superuser: true, bootstrap: true, can_login: true, valid_until: null },
    { name: 'dba', superuser: true, bootstrap: false, can_login: true, valid_until: null },
    { name: 'etl', superuser: true, bootstrap: false, can_login: true, valid_until: null },
  ],
  md5_roles: [],
  definer_functions: [],
  public_create_schemas: [],
  hba_rules: [],
}

function batch(name: string, now: number): IngestBatch {
  const prepared: XminHolder = {
    kind: 'prepared',
    xmin_age: 1_200,
    gid: 'tx-42',
    owner: 'app',
    database: 'shop',
    prepared_at: now - 10 * MINUTE,
    locks: 3,
  }
  return pgBatch(name, now, {
    database_stats: {
      prepared_xacts: 1,
      xmin_prepared_age: 1_200,
      xmin_prepared_age_s: 600,
      xmin_backend_age: null,
      xmin_backend_pid: null,
      xmin_slot_age: null,
    },
    xmin_holders: [prepared],
    security,
  })
}

const rulesOf = (body: any) =>
  new Map((body.rules as any[]).map((r) => [r.rule, new Map((r.thresholds as any[]).map((t) => [t.key, t]))]))

for (const kind of storeKinds) {
  describe(`thresholds per database (${kind})`, () => {
    let server: TestServer
    let id = ''
    let owner: Account
    let adminKey = ''
    let member: Account
    let readKey = ''
    const path = () => `/api/v1/databases/${id}/thresholds`
    const call = (method: string, auth: { token?: string; apiKey?: string }, body?: unknown) =>
      server.call(method, path(), { ...auth, body })
    const findings = async () => {
      const res = await server.call('GET', `/api/v1/databases/${id}/doctor`, { token: owner.token })
      expect(res.status).toBe(200)
      return (res.body.top_issues as any[]).filter(
        (f) => f.rule === 'pg_prepared_transactions' || f.rule === 'pg_superusers',
      )
    }

    beforeAll(async () => {
      server = await startTestServer(kind)
      const agent = await agentAccount(server)
      owner = agent.account
      adminKey = agent.key
      const ingested = await server.call('POST', '/api/v1/ingest', {
        apiKey: adminKey,
        body: batch('shop', Date.now() - 5_000),
      })
      expect(ingested.status).toBe(200)
      id = ingested.body.database_id
      member = await inviteMember(server, owner)
      readKey = (await createApiKey(server, owner, 'reader', ['read'])).key
    })
    afterAll(async () => {
      await server?.stop()
    })

    test('GET: every rule of the engine with its defaults and ranges; members and read keys may read', async () => {
      const res = await call('GET', { apiKey: readKey })
      expect(res.status).toBe(200)
      expect(res.body.database_id).toBe(id)
      const rules = rulesOf(res.body)
      expect(rules.get('pg_prepared_transactions')?.get('warning_s')).toEqual({
        key: 'warning_s',
        kind: 'number',
        default: 300,
        value: 300,
        overridden: false,
        updated_at: null,
        minimum: 0,
        maximum: 2_592_000,
        whole: false,
      })
      expect(rules.get('pg_superusers')?.get('allowed_names')).toMatchObject({
        kind: 'names',
        default: [],
        value: [],
        overridden: false,
        minimum: null,
      })
      expect(rules.get('pg_rollback_ratio')?.get('warning_commit_ratio')).toMatchObject({
        default: 0.9,
        minimum: 0,
        maximum: 1,
      })
      expect([...rules.keys()].some((r) => r.startsWith('ch_'))).toBe(false)
      expect((await call('GET', { token: member.token })).status).toBe(200)
    })

    test('a real diagnosis follows the thresholds; a change makes the stored diagnosis stale; DELETE restores the defaults', async () => {
      const admin = { apiKey: adminKey }
      const before = await findings()
      expect(before.map((f) => [f.key, f.severity])).toEqual([
        ['pg_prepared_transactions:prepared transaction tx-42', 'warning'],
        ['pg_superusers:superusers', 'warning'],
      ])
      expect(before[1].metrics.superusers).toBe(2)

      // No new batch: only the thresholds change, and the next answer is a new diagnosis.
      const put = await call('PUT', admin, {
        thresholds: {
          pg_prepared_transactions: { warning_s: 900, critical_s: 7200 },
          pg_superusers: { allowed_names: ['dba'] },
        },
      })
      expect(put.status).toBe(200)
      const set = rulesOf(put.body).get('pg_prepared_transactions')!.get('warning_s')
      expect(set).toMatchObject({ value: 900, default: 300, overridden: true })
      expect(Date.parse(set.updated_at)).toBeGreaterThan(0)
      const after = await findings()
      expect(after.map((f) => f.key)).toEqual(['pg_superusers:superusers'])
      expect(after[0].metrics).toMatchObject({ superusers: 1, allowed_names: 1 })
      expect(after[0].objects).toEqual(['role etl'])

      // null takes one key back to its default; the keys not named keep theirs.
      const back = await call('PUT', admin, {
        thresholds: { pg_superusers: { allowed_names: null, allowed_superusers: 2 } },
      })
      expect(rulesOf(back.body).get('pg_superusers')!.get('allowed_names')).toMatchObject({
        value: [],
        overridden: false,
      })
      expect(rulesOf(back.body).get('pg_prepared_transactions')!.get('warning_s')).toMatchObject({
        value: 900,
        overridden: true,
      })
      expect(await findings()).toEqual([])

      const cleared = await call('DELETE', admin)
      expect(cleared.status).toBe(204)
      expect((await findings()).map((f) => f.key)).toEqual(before.map((f) => f.key))
      expect(
        [...rulesOf((await call('GET', admin)).body).values()].every((keys) =>
          [...keys.values()].every((t) => !t.overridden),
        ),
      ).toBe(true)
    })

    test('400s name the rule, key or value and store nothing; members and read keys may not write; another organization sees 404', async () => {
      const admin = { apiKey: adminKey }
      const cases: [unknown, string][] = [
        [{ thresholds: { pg_nope: { x: 1 } } }, 'pg_nope: no such rule'],
        [
          { thresholds: { ch_memory: { warning_ratio: 0.5 } } },
          'ch_memory: the rule does not apply to a PostgreSQL database',
        ],
        [
          { thresholds: { pg_prepared_transactions: { warning_minutes: 5 } } },
          'pg_prepared_transactions.warning_minutes: no such threshold (pg_prepared_transactions has warning_s, critical_s)',
        ],
        [
          { thresholds: { pg_rollback_ratio: { warning_commit_ratio: 1.5 } } },
          'pg_rollback_ratio.warning_commit_ratio must be from 0 to 1',
        ],
        [
          { thresholds: { pg_prepared_transactions: { warning_s: -1 } } },
          'pg_prepared_transactions.warning_s must be from 0 to 2592000',
        ],
        // A window is at most 7 days (a longer one once made a diagnosis walk hours for ever), in its unit.
        [
          { thresholds: { pg_cache_hit_ratio: { window_s: 1e15 } } },
          'pg_cache_hit_ratio.window_s must be from 1 to 604800',
        ],
        [
          { thresholds: { pg_log_error_rate: { baseline_hours: 169 } } },
          'pg_log_error_rate.baseline_hours must be from 1 to 168',
        ],
        [
          { thresholds: { pg_statement_regressed: { recent_s: 0 } } },
          'pg_statement_regressed.recent_s must be from 1 to 604800',
        ],
        // Every other number is bounded by what it is: an age, a size, a count of findings.
        [
          { thresholds: { pg_long_running_queries: { critical_s: 1e15 } } },
          'pg_long_running_queries.critical_s must be from 0 to 31536000',
        ],
        [
          { thresholds: { pg_wraparound: { critical_age: 3e9 } } },
          'pg_wraparound.critical_age must be from 0 to 2147483648',
        ],
        [
          { thresholds: { pg_dead_tuples: { max_findings: 1e6 } } },
          'pg_dead_tuples.max_findings must be from 0 to 1000',
        ],
        [
          { thresholds: { pg_dead_tuples: { min_dead_rows: 1e15 } } },
          'pg_dead_tuples.min_dead_rows must be from 0 to 1000000000000',
        ],
        [
          { thresholds: { pg_superusers: { allowed_superusers: 1.5 } } },
          'pg_superusers.allowed_superusers must be a whole number',
        ],
        [
          { thresholds: { pg_superusers: { allowed_superusers: ['dba'] } } },
          'pg_superusers.allowed_superusers must be a number or null',
        ],
        [
          { thresholds: { pg_superusers: { allowed_names: 3 } } },
          'pg_superusers.allowed_names must be a list of at most 100 names of 1 to 63 bytes, or null',
        ],
        [
          { thresholds: { pg_superusers: { allowed_names: ['x'.repeat(64)] } } },
          'pg_superusers.allowed_names must be a list of at most 100 names of 1 to 63 bytes, or null',
        ],
        [
          { thresholds: { pg_prepared_transactions: { warning_s: 7200 } } },
          'pg_prepared_transactions.warning_s (7200) must not be above critical_s (3600)',
        ],
        [
          { thresholds: { pg_rollback_ratio: { critical_commit_ratio: 0.95 } } },
          'pg_rollback_ratio.warning_commit_ratio (0.9) must not be below critical_commit_ratio (0.95)',
        ],
        [
          { thresholds: { pg_prepared_transactions: { warning_s: 'soon' } } },
          'invalid thresholds.pg_prepared_transactions.warning_s: Expected union value',
        ],
        [
          { pg_prepared_transactions: { warning_s: 600 } },
          'thresholds must be an object of rules, each an object of keys whose values are a number, a list of names, or null',
        ],
      ]
      for (const [body, error] of cases) {
        const res = await call('PUT', admin, body)
        expect({ body, status: res.status, answer: res.body }).toEqual({ body, status: 400, answer: { error } })
      }
      // A bad key beside a good one stores neither.
      expect(
        (
          await call('PUT', admin, {
            thresholds: { pg_prepared_transactions: { warning_s: 600 }, pg_superusers: { nope: 1 } },
          })
        ).status,
      ).toBe(400)
      expect(
        rulesOf((await call('GET', admin)).body)
          .get('pg_prepared_transactions')!
          .get('warning_s').overridden,
      ).toBe(false)

      const change = { thresholds: { pg_prepared_transactions: { warning_s: 600 } } }
      for (const who of [{ token: member.token }, { apiKey: readKey }]) {
        expect((await call('PUT', who, change)).status).toBe(403)
        expect((await call('DELETE', who)).status).toBe(403)
      }
      const stranger = await signup(server, { org_name: 'Elsewhere' })
      for (const method of ['GET', 'PUT', 'DELETE']) {
        const res = await call(method, { token: stranger.token }, method === 'PUT' ? change : undefined)
        expect({ method, status: res.status, body: res.body }).toEqual({
          method,
          status: 404,
          body: { error: 'database not found' },
        })
      }
    })

    test('a value stored before its range narrowed is left out: the default applies, and the doctor answers', async () => {
      await server.store.thresholds.changeThresholds(
        id,
        [{ rule: 'pg_cache_hit_ratio', key: 'window_s', value: 1e15 }],
        Date.now(),
      )
      try {
        const entry = rulesOf((await call('GET', { apiKey: adminKey })).body)
          .get('pg_cache_hit_ratio')!
          .get('window_s')
        expect(entry).toMatchObject({ value: 3600, default: 3600, overridden: false, minimum: 1, maximum: 604_800 })
        const started = performance.now()
        expect((await server.call('GET', `/api/v1/databases/${id}/doctor`, { token: owner.token })).status).toBe(200)
        expect(performance.now() - started).toBeLessThan(10_000)
      } finally {
        await server.store.thresholds.clearThresholds(id)
      }
    })
  })
}
