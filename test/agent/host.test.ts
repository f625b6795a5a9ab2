// The host collector on a real PostgreSQL 17 running on this machine: it finds the evidence (the
// server's address is local, its postmaster.pid matches), measures the data directory with the WAL
// beside it as one filesystem of two roles, and a tablespace of a hostile name on a 64 MiB tmpfs as
// another, each with the figures statfs gives for the same path; memory is /proc/meminfo's; the second
// cycle has CPU shares. An agent elsewhere (a data directory that does not exist here) sends nothing.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { execFileSync } from 'node:child_process'
import { chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, statfsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { host } from '../../src/agent/collectors/postgres/host.ts'
import type { PostgresContext } from '../../src/agent/collectors/types.ts'
import { isLocalAddress, judgeHost, postgresHostFacts } from '../../src/agent/host/evidence.ts'
import { createLogger } from '../../src/shared/log.ts'
import { type PostgresServer, sharedPostgres } from '../support/postgres.ts'

const SIZE = 64 * 1024 * 1024
const SPACE = 'ts "o\'brien"\n\u202eüñ'

let server: PostgresServer
let sql: postgres.Sql
let dir = ''
let mounted = false

beforeAll(async () => {
  server = await sharedPostgres(17)
  sql = postgres(server.url(), { max: 1, onnotice: () => {} })
  dir = mkdtempSync(join(tmpdir(), 'dbm-host-ts-'))
  if (process.getuid?.() === 0) {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${SIZE}`, 'tmpfs', dir])
    mounted = true
  }
  const [{ data_directory }] = (await sql`SELECT current_setting('data_directory') AS data_directory`) as unknown as [
    { data_directory: string },
  ]
  const owner = statSync(data_directory)
  mkdirSync(join(dir, 'ts'))
  chownSync(join(dir, 'ts'), owner.uid, owner.gid)
  await sql.unsafe(`CREATE TABLESPACE "${SPACE.replaceAll('"', '""')}" LOCATION '${join(dir, 'ts')}'`)
})

afterAll(async () => {
  await sql.unsafe(`DROP TABLESPACE IF EXISTS "${SPACE.replaceAll('"', '""')}"`).catch(() => {})
  await sql.end()
  if (mounted) execFileSync('umount', [dir])
  rmSync(dir, { recursive: true, force: true })
})

const context = (state: Map<string, unknown>, infos: Map<string, string>): PostgresContext => ({
  name: 'host',
  database: 'postgres',
  sql,
  versionNum: 170_000,
  major: 17,
  now: Date.now(),
  settings: { collectExplainPlans: false, collectReplication: false },
  state,
  notes: new Map(),
  infos,
  log: createLogger('error', () => {}),
})

test('beside its server: evidence, filesystems by role with statfs figures, memory, then CPU shares', async () => {
  const state = new Map<string, unknown>()
  const infos = new Map<string, string>()
  const first = (await host.collect(context(state, infos))).host!
  expect(first.source).toBe('proc')
  expect(first.evidence).toContain("the server's address 127.0.0.1 is one of this host's")
  expect(first.evidence).toContain("postmaster.pid names the server's port")
  expect(first.cpu).toBeNull()
  const [{ data_directory }] = (await sql`SELECT current_setting('data_directory') AS data_directory`) as unknown as [
    { data_directory: string },
  ]
  const data = first.filesystems.find((f) => f.roles.includes('data'))!
  expect(data.roles).toEqual(['data', 'wal'])
  expect(data.path).toBe(data_directory)
  const ds = statfsSync(data_directory)
  expect(data.total_bytes).toBe(ds.blocks * ds.bsize)
  // Other tests write to this disk meanwhile: within 256 MiB.
  expect(Math.abs(data.available_bytes - ds.bavail * ds.bsize)).toBeLessThan(256 * 1024 * 1024)
  const space = first.filesystems.find((f) => f.roles.includes(`tablespace:${SPACE}`))!
  expect(space.path).toBe(join(dir, 'ts'))
  const ts = statfsSync(join(dir, 'ts'))
  expect({ total: space.total_bytes, available: space.available_bytes }).toEqual({
    total: ts.blocks * ts.bsize,
    available: ts.bavail * ts.bsize,
  })
  if (mounted)
    expect({ total: space.total_bytes, mount: space.mount, device: space.device }).toEqual({
      total: SIZE,
      mount: dir,
      device: 'tmpfs',
    })
  const memTotal = Number(/MemTotal:\s+(\d+) kB/.exec(readFileSync('/proc/meminfo', 'utf8'))![1]) * 1024
  expect(first.memory!.total_bytes).toBe(memTotal)
  expect(first.cpu_count).toBeGreaterThan(0)
  expect(infos.has('host')).toBe(false)

  const second = (await host.collect(context(state, infos))).host!
  // /proc/stat moves in 10 ms ticks; on two busy cores a few ms apart it may not have: then null.
  if (second.cpu) {
    const { user, system, iowait, steal, idle } = second.cpu
    expect(Math.abs(user + system + iowait + steal + idle - 100)).toBeLessThan(1)
  }
})

test('elsewhere: a data directory that does not exist here outweighs a local address', async () => {
  const facts = await postgresHostFacts(sql)
  const verdict = await judgeHost({ ...facts, dataDirectory: '/nonexistent/dbm/main' })
  expect(verdict).toEqual({
    onHost: false,
    reason: expect.stringContaining('/nonexistent/dbm/main does not exist here'),
  })
  const remote = await judgeHost({ ...facts, addr: '192.0.2.10/32', dataDirectory: null })
  expect(remote.onHost).toBe(false)
})

test("an address is this host's when the kernel lets a socket bind to it (no netlink socket, which systemd's unit forbids)", async () => {
  expect(await isLocalAddress('127.0.0.1')).toBe(true)
  expect(await isLocalAddress('::ffff:127.0.0.1')).toBe(true)
  // TEST-NET-2 (RFC 5737): never an address of this host
  expect(await isLocalAddress('198.51.100.77')).toBe(false)
  expect(await isLocalAddress('not an address')).toBe(false)
})
