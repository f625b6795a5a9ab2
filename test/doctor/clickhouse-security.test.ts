// ClickHouse's security advisors on the real engine (the chdb rig) watched by the real agent: users
// declared in users.xml without a password (open to every network, and restricted to loopback), with a
// password but open to every network, and one restricted with a hashed password. The engine's own
// system.users is what the agent reads; the findings name each user (quoted as ClickHouse quotes names)
// with the users.xml change that fixes it, as those users are read-only to SQL.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type ClickHouseRig, startClickHouse } from '../support/clickhouse.ts'
import { type DoctorRig, watchDatabase } from '../support/doctor.ts'

setDefaultTimeout(60_000)

let dir: string
let ch: ClickHouseRig
let rig: DoctorRig

const sha256 = (text: string) => new Bun.CryptoHasher('sha256').update(text).digest('hex')

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'dbm-ch-security-'))
  const user = (name: string, auth: string, networks: string) =>
    `<${name}>${auth}<networks>${networks}</networks><profile>default</profile><quota>default</quota></${name}>`
  // `default` runs the rig's queries: it manages access, so it may read system.users.
  writeFileSync(
    join(dir, 'users.xml'),
    `<clickhouse><profiles><default/></profiles><quotas><default/></quotas><users>
      ${user('default', '<no_password/><access_management>1</access_management>', '<ip>::/0</ip>')}
      ${user('reporter', '<no_password/>', '<ip>127.0.0.1</ip>')}
      ${user('ops.ü-admin', '<password>secret</password>', '<ip>::/0</ip>')}
      ${user('app', `<password_sha256_hex>${sha256('app secret')}</password_sha256_hex>`, '<ip>10.0.0.0/8</ip>')}
    </users></clickhouse>`,
  )
  writeFileSync(
    join(dir, 'config.xml'),
    `<clickhouse><user_directories><users_xml><path>${join(dir, 'users.xml')}</path></users_xml></user_directories></clickhouse>`,
  )
  ch = await startClickHouse({ configFile: join(dir, 'config.xml') })
  rig = await watchDatabase(ch.dsn)
})

afterAll(async () => {
  await rig?.stop()
  await ch?.stop()
  rmSync(dir, { recursive: true, force: true })
})

describe('ClickHouse users', () => {
  test('without a password: critical when open to every network, a warning when restricted; with the users.xml fix', async () => {
    const snapshot = await rig.server.store.latestSnapshot(rig.dbId, 'clickhouse_users')
    const users = (
      snapshot!.payload as {
        users: { name: string; auth_type: string[]; host_ip: string[]; host_names: string[]; storage: string }[]
      }
    ).users
    // A loopback address is this machine: ClickHouse shows it as the host name localhost.
    expect(users.map((u) => [u.name, u.auth_type, u.host_ip, u.host_names, u.storage])).toEqual([
      ['app', ['sha256_password'], ['10.0.0.0/8'], [], 'users_xml'],
      ['default', ['no_password'], ['::/0'], [], 'users_xml'],
      ['ops.ü-admin', ['plaintext_password'], ['::/0'], [], 'users_xml'],
      ['reporter', ['no_password'], [], ['localhost'], 'users_xml'],
    ])

    const findings = await rig.findings('ch_users_without_password')
    expect(findings.map((f) => [f.severity, f.title, f.objects])).toEqual([
      ['critical', '1 ClickHouse user without a password, open to every network: default', ['user default']],
      ['warning', '1 ClickHouse user without a password: reporter', ['user reporter']],
    ])
    expect(findings[0].category).toBe('security')
    expect(findings[0].detail).toStartWith(
      'default (users_xml, from ::/0) logs in without a password: and from every network',
    )
    expect(findings[0].how_to_fix).toEqual([
      "-- users.xml: in <users><default>, replace <no_password/> or the empty <password> with <password_sha256_hex> of a new password (echo -n '<new password>' | sha256sum), then restart or wait for the reload",
      "-- users.xml: in <users><default><networks>, replace ::/0 with the clients' networks (<ip>10.0.0.0/8</ip>, <host>app.example.com</host>)",
    ])
    expect(findings[1].detail).toContain(
      'reporter (users_xml, from localhost) logs in without a password: only from the hosts listed',
    )
  })

  test('with a password but open to every network: a note naming the user quoted, the one restricted user left out', async () => {
    const [finding] = await rig.findings('ch_users_any_host')
    expect(finding).toMatchObject({
      severity: 'info',
      category: 'security',
      title: '1 ClickHouse user may connect from every network: `ops.ü-admin`',
      objects: ['user `ops.ü-admin`'],
      metrics: { users: 1 },
    })
    expect(finding.how_to_fix).toEqual([
      "-- users.xml: in <users><ops.ü-admin><networks>, replace ::/0 with the clients' networks (<ip>10.0.0.0/8</ip>, <host>app.example.com</host>)",
    ])
  })
})
