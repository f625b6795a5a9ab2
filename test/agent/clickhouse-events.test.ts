// ClickHouse events end to end: the real agent against the real ClickHouse engine (the chdb rig),
// shipping to a real server. The agent's first batch is a connection; its server_state carries the
// server's start (now less uptime(), as ClickHouse reports them) and the changed settings without the
// ones its own HTTP client sets; a MergeTree table with a hostile name gets its first parts and shows as
// created, named exactly; dropped, it shows as gone.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type AgentRig, startAgentRig } from '../support/agent.ts'
import { type ClickHouseRig, startClickHouse } from '../support/clickhouse.ts'
import { until } from '../support/wait.ts'

const TABLE = `ev "t" ü`

let ch: ClickHouseRig
let dir: string
let rig: AgentRig

beforeAll(async () => {
  ch = await startClickHouse({ user: 'dbm_agent', password: 'secret' })
  dir = mkdtempSync(join(tmpdir(), 'dbm-clickhouse-events-'))
  rig = await startAgentRig(ch.dsn, 'ch-events', dir)
})

afterAll(async () => {
  await rig?.stop()
  await ch?.stop()
  rmSync(dir, { recursive: true, force: true })
})

interface Event {
  ts: string
  kind: string
  title: string
  detail?: string
  object?: string
}

const events = (): Promise<Event[]> => rig.api('/events')
const eventually = (what: string, pick: (e: Event) => boolean) =>
  until(what, async () => (await events()).find(pick), { timeoutMs: 30_000, everyMs: 200 })

describe('ClickHouse events through the agent', () => {
  test("the first batch is a connection; the server's start and changed settings are known, the agent's own client settings left out", async () => {
    const connected = await eventually('the first connection', (e) => e.kind === 'agent_connected')
    expect(connected.detail).toBe('first batch from the agent')
    const [truth] = await ch.query<{ started: string }>(
      'SELECT toUnixTimestamp64Milli(now64(3)) - uptime() * 1000 AS started',
    )
    const baseline = await until('the baseline', async () =>
      rig.server.store.driver.get<{ started_at: number; settings: string | null }>(
        'SELECT started_at, settings FROM event_baselines WHERE database_id = $1',
        [rig.dbId],
      ),
    )
    // uptime() counts whole seconds
    expect(Math.abs(Number(baseline.started_at) - Number(truth!.started))).toBeLessThanOrEqual(2_000)
    const settings = JSON.parse(baseline.settings ?? 'null') as Record<string, string>
    expect(settings).not.toBeNull()
    for (const own of [
      'log_comment',
      'max_execution_time',
      'output_format_json_quote_64bit_integers',
      'cancel_http_readonly_queries_on_client_close',
    ]) {
      expect({ own, present: own in settings }).toEqual({ own, present: false })
    }
    // The Configuration page: the same changed settings, each with system.settings' default and type.
    const config = await rig.api('/configuration')
    expect(config).toMatchObject({ engine: 'clickhouse', details: true })
    expect(config.total).toBeGreaterThan(0)
    expect(config.settings.map((s: { name: string }) => s.name)).toEqual(Object.keys(settings).sort())
    const truthRows = await ch.query<{ name: string; default: string; type: string }>(
      'SELECT name, `default`, type FROM system.settings ORDER BY name',
    )
    const defaults = new Map(truthRows.map((r) => [r.name, r]))
    for (const s of config.settings)
      expect({ name: s.name, default: s.default, type: s.type, changed: s.changed }).toEqual({
        name: s.name,
        default: defaults.get(s.name)!.default,
        type: defaults.get(s.name)!.type,
        changed: true,
      })
  })

  test('a MergeTree table with a hostile name: created with its first parts, gone when dropped', async () => {
    const quoted = `\`${TABLE.replaceAll('\\', '\\\\').replaceAll('`', '\\`')}\``
    await ch.command(`CREATE TABLE default.${quoted} (id UInt64) ENGINE = MergeTree ORDER BY id`)
    await ch.command(`INSERT INTO default.${quoted} SELECT number FROM numbers(10)`)
    const created = await eventually(
      'the table created',
      (e) => e.kind === 'table_created' && e.object === `default.${TABLE}`,
    )
    expect(created).toMatchObject({ title: `Table created: default.${TABLE}`, detail: 'its first active parts' })
    await ch.command(`DROP TABLE default.${quoted} SYNC`)
    const gone = await eventually(
      'the table gone',
      (e) => e.kind === 'table_dropped' && e.object === `default.${TABLE}`,
    )
    expect(gone.title).toBe(`Table gone: default.${TABLE}`)
  })
})
