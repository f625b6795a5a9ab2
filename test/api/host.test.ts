// GET /host and the disk forecast. A real 64 MiB tmpfs (mounted by the test when it runs as root, else
// a temporary directory on the machine's disk with the same steps) is filled 2 MiB per step; each
// step's real host sample (statfs of the tmpfs) is ingested as one minute's batch, so free space falls
// at a known 2 MiB a minute, and the forecast must name the minute it reaches zero within 20 %. Also:
// the filesystem's roles and series, the host series, a database without host figures (the agent's
// note, and the growth of its size from database_stats), the route in the OpenAPI document, and 404s.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, statfsSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type HostMemory, sampleHost } from '../../src/agent/host/sample.ts'
import type { HostStatus } from '../../src/shared/wire.ts'
import { MINUTE, agentSession, at, iso, pgBatch } from '../support/batches.ts'

const SIZE = 64 * 1024 * 1024
const STEP = 2 * 1024 * 1024
const STEPS = 16

let dir = ''
let mounted = false

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'dbm-host-fs-'))
  if (process.getuid?.() === 0) {
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${SIZE}`, 'tmpfs', dir])
      mounted = true
    } catch {}
  }
})

afterAll(() => {
  if (mounted) execFileSync('umount', [dir])
  rmSync(dir, { recursive: true, force: true })
})

describe('GET /host', () => {
  const session = agentSession('sqlite')
  const { ingest, ok, get } = session

  test('a filesystem filled at 2 MiB a minute: its fill minute within 20 %, its series, the host series', async () => {
    const samples: { ts: number; status: HostStatus }[] = []
    let memory: HostMemory = {}
    for (let i = 0; i <= STEPS; i++) {
      if (i > 0) writeFileSync(join(dir, `fill-${i}`), Buffer.alloc(STEP, 1))
      const sample = await sampleHost(
        [
          { role: 'wal', path: dir },
          { role: "tablespace:o'brien\n\u202e", path: dir },
        ],
        memory,
      )
      memory = sample.memory
      samples.push({ ts: at(i), status: { source: 'proc', evidence: 'test', ...sample.status } })
    }
    const [fs] = samples.at(-1)!.status.filesystems
    // One filesystem with both roles; its figures are statfs's.
    expect(fs!.roles).toEqual(['wal', "tablespace:o'brien\n\u202e"])
    const s = statfsSync(dir)
    expect(fs!.available_bytes).toBe(s.bavail * s.bsize)
    if (mounted) expect({ total: fs!.total_bytes, mount: fs!.mount }).toEqual({ total: SIZE, mount: dir })

    let id = ''
    for (const { ts, status } of samples) id = await ingest(pgBatch('host-fill', ts, { host: status }))
    const answer = await ok(id, `/host?since=${iso(at(0))}&until=${iso(at(STEPS + 1))}`)
    expect(answer.on_host).toBe(true)
    expect(answer.evidence).toBe('test')
    const view = answer.filesystems[0]
    expect(view.series.map((p: { available_bytes: number }) => p.available_bytes)).toEqual(
      samples.map((x) => x.status.filesystems[0]!.available_bytes),
    )
    expect(view.forecast.trend.samples).toBe(STEPS + 1)
    expect(view.forecast.trend.basis_seconds).toBe(STEPS * 60)
    if (mounted) {
      // Exact on a tmpfs nobody else writes to: 2 MiB a minute.
      expect(view.forecast.trend.rate_bytes_per_s).toBeCloseTo(-STEP / 60, 0)
      const truth = at(STEPS) + (fs!.available_bytes / STEP) * MINUTE
      const forecast = Date.parse(view.forecast.fills_at)
      console.log(
        `tmpfs forecast: ${view.forecast.fills_at}, truth ${iso(truth)}, rate ${view.forecast.trend.rate_bytes_per_s} B/s`,
      )
      expect(Math.abs(forecast - truth)).toBeLessThanOrEqual(0.2 * (truth - at(STEPS)))
    }
    if (mounted) {
      // The doctor: critical, fills within 24 hours, one finding for the filesystem of both roles.
      const findings = (await ok(id, '/doctor')).top_issues.filter((f: { rule: string }) => f.rule === 'pg_disk_fill')
      expect(
        findings.map((f: { severity: string; metrics: { fills_at: string } }) => [f.severity, f.metrics.fills_at]),
      ).toEqual([['critical', view.forecast.fills_at]])
      expect(findings[0].title).toStartWith('The disk holding the WAL, tablespace ')
    }
    expect(answer.series.length).toBe(STEPS + 1)
    expect(answer.series[1].memory_total_bytes).toBe(samples[1]!.status.memory!.total_bytes)
    expect(answer.series[1].cpu_idle).toBe(samples[1]!.status.cpu?.idle ?? null)
  })

  test('growing free space and too little history give no fill time', async () => {
    const status = (available: number): HostStatus => ({
      source: 'proc',
      evidence: 'x',
      cpu_count: 1,
      cpu: null,
      load: null,
      memory: null,
      devices: [],
      filesystems: [
        {
          roles: ['data'],
          path: '/d',
          mount: '/d',
          device: 'sda1',
          total_bytes: 1e9,
          available_bytes: available,
          inodes_total: null,
          inodes_available: null,
        },
      ],
    })
    let grows = ''
    for (let i = 0; i <= 20; i++)
      grows = await ingest(pgBatch('host-grows', at(20 + i), { host: status(5e8 + i * 1e6) }))
    const g = await ok(grows, `/host?since=${iso(at(20))}&until=${iso(at(41))}`)
    expect(g.filesystems[0].forecast.fills_at).toBeNull()
    expect(g.filesystems[0].forecast.trend.rate_bytes_per_s).toBeCloseTo(1e6 / 60, 3)
    let young = ''
    for (let i = 0; i <= 5; i++)
      young = await ingest(pgBatch('host-young', at(45 + i), { host: status(5e8 - i * 1e6) }))
    expect((await ok(young, '/host')).filesystems[0].forecast).toEqual({ trend: null, fills_at: null })
    // No finding at 50 % free; 8 % free without a trend is a warning, 4 % critical.
    const diskFindings = async (id: string) =>
      (await ok(id, '/doctor')).top_issues
        .filter((f: { rule: string }) => f.rule === 'pg_disk_fill')
        .map((f: { severity: string }) => f.severity)
    expect(await diskFindings(grows)).toEqual([])
    expect(await diskFindings(await ingest(pgBatch('host-8pct', at(50), { host: status(8e7) })))).toEqual(['warning'])
    expect(await diskFindings(await ingest(pgBatch('host-4pct', at(50), { host: status(4e7) })))).toEqual(['critical'])
  })

  test("a database without host figures: the agent's note and the growth of its size", async () => {
    let id = ''
    for (let i = 0; i <= 30; i++) {
      id = await ingest(
        pgBatch('no-host', at(60 + i), {
          database_stats: { database_size_bytes: 1e9 + i * 6e6 },
          collector_notes: [
            { collector: 'host', message: 'host figures need the agent on the database host: x', level: 'info' },
          ],
        }),
      )
    }
    const answer = await ok(id, '/host')
    expect(answer).toMatchObject({
      on_host: false,
      ts: null,
      filesystems: [],
      series: [],
      note: 'host figures need the agent on the database host: x',
    })
    expect(answer.database_size.latest_bytes).toBe(1e9 + 30 * 6e6)
    expect(answer.database_size.trend.rate_bytes_per_s).toBeCloseTo(1e5, 3)
    expect(answer.database_size.trend.samples).toBe(31)
  })

  test('documented in the OpenAPI document; 404 for an unknown database, 400 for a bad window', async () => {
    const doc = await session.server.call('GET', '/api/v1/openapi.json')
    expect(doc.body.paths['/api/v1/databases/{id}/host'].get.responses['200']).toBeDefined()
    expect((await get(crypto.randomUUID(), '/host')).status).toBe(404)
    const id = await ingest(pgBatch('host-window', at(95)))
    expect(await get(id, '/host?since=yesterday')).toEqual({
      status: 400,
      body: { error: 'since must be an RFC 3339 timestamp, like 2026-01-31T12:00:00Z' },
    })
  })
})
