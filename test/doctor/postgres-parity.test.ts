// The PgHero-parity rules on the shared PostgreSQL 17, driven by the real agent over a fresh database:
// an inactive replication slot flagged from 80 MB retained with the default thresholds, NOT VALID
// constraints with a VALIDATE command that PostgreSQL runs, and bloat estimates past their threshold.
// Names are hostile (quotes, newlines, comment ends, unicode): the commands must still be the meant ones.
import { afterEach, expect, test } from 'bun:test'
import type postgres from 'postgres'
import { type PostgresDoctorRig, postgresDoctorRig } from '../support/doctor.ts'
import { pgObject } from '../../src/shared/sql-text.ts'

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
    (
      await sql`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::float8 AS b FROM pg_replication_slots WHERE slot_name = ${slot}`
    )[0]!.b as number
  const [{ segment }] =
    (await sql`SELECT setting::bigint AS segment FROM pg_settings WHERE name = 'wal_segment_size'`) as unknown as [
      { segment: string },
    ]
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
    const [warning] = (await rig.findings('pg_inactive_replication_slot')).filter(
      (f) => f.key === `pg_inactive_replication_slot:${slot}`,
    )
    expect(warning).toMatchObject({ severity: 'warning', objects: [slot], metrics: { slot_type: 'physical' } })
    expect(warning.metrics.retained_bytes).toBeGreaterThanOrEqual(over)
    expect(warning.metrics.retained_bytes).toBeLessThan(over + segmentBytes)
  } finally {
    await sql`SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = ${slot}`
  }
  await rig.cycle()
  expect((await rig.findings('pg_inactive_replication_slot')).filter((f) => f.key.endsWith(slot))).toEqual([])
})

const SCHEMA = 'we"ird\n*/ schéma'
const TABLE = 'ta\'ble"\n*/ ünï 🐘'
const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`
const QUALIFIED = `${quoteIdent(SCHEMA)}.${quoteIdent(TABLE)}`

test('a NOT VALID constraint: a warning whose VALIDATE command PostgreSQL runs once the bad row is fixed; gone after', async () => {
  rig = await postgresDoctorRig(17)
  const { sql } = rig
  const name = 'ck"\n*/ ü 🐘'
  await sql.unsafe(`CREATE SCHEMA ${quoteIdent(SCHEMA)}`)
  await sql.unsafe(`CREATE TABLE ${QUALIFIED} (id int, qty int)`)
  await sql.unsafe(`INSERT INTO ${QUALIFIED} VALUES (1, -5), (2, 3)`)
  await sql.unsafe(`ALTER TABLE ${QUALIFIED} ADD CONSTRAINT ${quoteIdent(name)} CHECK (qty > 0) NOT VALID`)
  await rig.cycle()
  const [finding] = await rig.findings('pg_invalid_constraints')
  expect(finding).toMatchObject({
    // names in keys and objects as pgIdent writes them: no two objects' keys read alike
    key: `pg_invalid_constraints:${pgObject(SCHEMA, TABLE, name)}`,
    severity: 'warning',
    category: 'schema',
    objects: [pgObject(SCHEMA, TABLE, name)],
    metrics: { constraint_type: 'check', definition: 'CHECK ((qty > 0)) NOT VALID' },
  })
  expect(finding.how_to_fix).toEqual([
    'ALTER TABLE U&"we""ird\\000A*/ schéma".U&"ta\'ble""\\000A*/ ünï 🐘" VALIDATE CONSTRAINT U&"ck""\\000A*/ ü 🐘";',
  ])
  // The investigation query runs and finds the constraint.
  const [shown] = await sql.unsafe(finding.how_to_investigate[0])
  expect({ ...shown }).toEqual({ conname: name, definition: 'CHECK ((qty > 0)) NOT VALID' })
  // As given, the fix is refused while a row breaks the constraint, and validates it once the row is fixed.
  expect(
    await sql.unsafe(finding.how_to_fix[0]).then(
      () => 'validated',
      (e: Error) => e.message,
    ),
  ).toContain('is violated by some row')
  await sql.unsafe(`UPDATE ${QUALIFIED} SET qty = 5 WHERE qty <= 0`)
  await sql.unsafe(finding.how_to_fix[0])
  const [{ convalidated }] = (await sql`SELECT convalidated FROM pg_constraint WHERE conname = ${name}`) as unknown as [
    { convalidated: boolean },
  ]
  expect(convalidated).toBe(true)
  await rig.cycle()
  expect(await rig.findings('pg_invalid_constraints')).toEqual([])
})

/** A table of 150,000 rows with two of three deleted and a plain VACUUM: about 2/3 of it estimated bloat. */
async function bloatedTable(sql: postgres.Sql) {
  await sql.unsafe(`CREATE SCHEMA ${quoteIdent(SCHEMA)}`)
  await sql.unsafe(`CREATE TABLE ${QUALIFIED} (id int, note text)`)
  await sql.unsafe(`INSERT INTO ${QUALIFIED} SELECT g, repeat('n', 40) || g FROM generate_series(1, 150000) g`)
  await sql.unsafe(`DELETE FROM ${QUALIFIED} WHERE id % 3 <> 0`)
  await sql.unsafe(`VACUUM ANALYZE ${QUALIFIED}`)
  return Number((await sql.unsafe(`SELECT pg_relation_size('${QUALIFIED.replaceAll("'", "''")}') AS s`))[0]!.s)
}

test('bloat with the default thresholds: a small bloated table (under the 100 MB floor) is shown by the API as an estimate but not flagged', async () => {
  rig = await postgresDoctorRig(17)
  const size = await bloatedTable(rig.sql)
  expect(size).toBeLessThan(100 * MB)
  await rig.cycle()
  const body = await rig.api('/bloat?kind=table')
  expect(body.estimate).toBe(true)
  const [entry] = body.entries.filter((e: { table_name: string }) => e.table_name === TABLE)
  expect(entry.size_bytes).toBe(size)
  expect(entry.bloat_ratio).toBeGreaterThan(0.6)
  expect(await rig.findings('pg_bloat')).toEqual([])
})

test('bloat past the thresholds: a warning with the estimate; the VACUUM FULL it names clears it', async () => {
  rig = await postgresDoctorRig(17, { thresholds: { pg_bloat: { warning_bytes: MB } } })
  const size = await bloatedTable(rig.sql)
  await rig.cycle()
  const [finding] = await rig.findings('pg_bloat')
  expect(finding).toMatchObject({
    key: `pg_bloat:${pgObject(SCHEMA, TABLE)}`,
    severity: 'warning',
    category: 'maintenance',
    metrics: { kind: 'table', size_bytes: size, estimate: 'statistics' },
  })
  expect(finding.metrics.bloat_ratio).toBeGreaterThan(0.6)
  expect(finding.detail).toContain('an estimate, not a measurement')
  expect(finding.how_to_fix).toEqual([
    'VACUUM (FULL, ANALYZE) U&"we""ird\\000A*/ schéma".U&"ta\'ble""\\000A*/ ünï 🐘";',
  ])
  await rig.sql.unsafe(finding.how_to_fix[0])
  await rig.cycle()
  expect(await rig.findings('pg_bloat')).toEqual([])
})
