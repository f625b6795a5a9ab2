// Issue 32's security and configuration advisors on the oldest and newest supported majors (13 and 18),
// each on a server of this file's own (password_encryption = md5, pg_hba.conf lines added), watched by
// the real agent connected as the monitoring role of docs/postgresql-setup.md (not a superuser, with the
// GRANT on pg_hba_file_rules): every advisor names its object, hostile role, schema and function names
// come through sql-text.ts, what the role cannot read (pg_authid) is said in the finding and not an
// error; the investigations and fixes run as written, and a new agent then finds nothing left.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { appendFileSync } from 'node:fs'
import postgres from 'postgres'
import { security, securityNote, securityVisibility } from '../../src/agent/collectors/postgres/security.ts'
import type { PostgresContext } from '../../src/agent/collectors/types.ts'
import { beyondLoopback } from '../../src/server/doctor/rules/postgres/security/ssl-off.ts'
import { parsePgVersion, versionStanding } from '../../src/server/doctor/rules/postgres/security/version-support.ts'
import { type DoctorRig, watchDatabase } from '../support/doctor.ts'
import { type PostgresServer, startPostgres } from '../support/postgres.ts'

const q = (name: string) => `"${name.replaceAll('"', '""')}"`
const SUPER = `su'per */ ü`
const EXPIRING = `exp"iring\nrole */`
const EXPIRED = 'expired_role'
const MD5 = `md5'role ü`
const SCHEMA = `sch'ema */ ü`
const FN = `f"n\nx`
const HBA_USER = `odd'hba ü`
const RULES = [
  'pg_superusers',
  'pg_md5_passwords',
  'pg_password_expiry',
  'pg_definer_search_path',
  'pg_public_create',
  'pg_hba_methods',
  'pg_ssl_off',
  'pg_data_checksums',
  'pg_version_support',
]

/** Runs a psql `... \gexec` fix: the query, then each statement it returns. */
async function gexec(sql: postgres.Sql, fix: string) {
  const [query] = fix.split(' \\gexec')
  const statements = await sql.unsafe<{ format: string }[]>(query!)
  for (const { format } of statements) await sql.unsafe(format)
  return statements.length
}

test('the pure parts: listen_addresses beyond loopback, and where a version stands in the release table', () => {
  expect(beyondLoopback('localhost, 127.0.0.1, ::1')).toEqual([])
  expect(beyondLoopback('')).toEqual([])
  expect(beyondLoopback('*')).toEqual(['*'])
  expect(beyondLoopback('127.0.0.1, 10.1.2.3')).toEqual(['10.1.2.3'])
  expect(parsePgVersion('17.2 (Debian 17.2-1.pgdg120+1)')).toEqual({ major: '17', minor: 2 })
  expect(parsePgVersion('9.6.24')).toEqual({ major: '9.6', minor: 24 })
  expect(parsePgVersion('19devel')).toBeNull()
  const old = versionStanding('17.2')!
  expect(old.newer.map((n) => n.version)).toEqual(['17.3', '17.4', '17.5', '17.6', '17.7', '17.8', '17.9', '17.10'])
  // 17.4 and 17.9 were out-of-cycle releases without security fixes.
  expect(old.newer.filter((n) => n.security).length).toBe(6)
  expect(versionStanding('17.10')!.newer).toEqual([])
  expect(versionStanding('12.22')!.line?.eol).toBe('2024-11-21')
})

for (const major of [13, 18] as const) {
  describe(`PostgreSQL ${major}: the security advisors as the monitoring role sees them`, () => {
    let server: PostgresServer
    let admin: postgres.Sql
    let dsn: string
    let monitorDsn: string
    let rig: DoctorRig | undefined

    beforeAll(async () => {
      server = await startPostgres(major)
      dsn = await server.freshDatabase()
      admin = postgres(dsn, { max: 1, onnotice: () => {} })
      await admin.unsafe("ALTER SYSTEM SET password_encryption = 'md5'")
      await admin.unsafe('SELECT pg_reload_conf()')
      // The monitoring role of docs/postgresql-setup.md, its password stored as SCRAM (pg_hba asks for it).
      await admin.unsafe("SET password_encryption = 'scram-sha-256'")
      await admin.unsafe("CREATE ROLE dbm_monitor LOGIN PASSWORD 'mon-pw'")
      await admin.unsafe('GRANT pg_monitor TO dbm_monitor')
      await admin.unsafe(
        major >= 14
          ? 'GRANT pg_read_all_data TO dbm_monitor'
          : 'GRANT SELECT ON ALL TABLES IN SCHEMA public TO dbm_monitor',
      )
      await admin.unsafe('GRANT SELECT ON pg_hba_file_rules TO dbm_monitor')
      await admin.unsafe('GRANT EXECUTE ON FUNCTION pg_hba_file_rules() TO dbm_monitor')
      await admin.unsafe("SET password_encryption = 'md5'")
      // The bad states, with hostile names.
      await admin.unsafe(`CREATE ROLE ${q(SUPER)} SUPERUSER NOLOGIN`)
      await admin.unsafe(
        `CREATE ROLE ${q(EXPIRING)} LOGIN VALID UNTIL '${new Date(Date.now() + 3 * 86_400_000).toISOString()}'`,
      )
      await admin.unsafe(`CREATE ROLE ${q(EXPIRED)} LOGIN VALID UNTIL '2020-01-01'`)
      await admin.unsafe(`CREATE ROLE ${q(MD5)} LOGIN PASSWORD 'md5-pw'`)
      await admin.unsafe(`CREATE SCHEMA ${q(SCHEMA)}`)
      await admin.unsafe(
        `CREATE FUNCTION ${q(SCHEMA)}.${q(FN)}(a int, "b'c" text) RETURNS int LANGUAGE sql SECURITY DEFINER AS 'SELECT 1'`,
      )
      await admin.unsafe(
        `CREATE FUNCTION ${q(SCHEMA)}.fixed() RETURNS int LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog AS 'SELECT 1'`,
      )
      // PostgreSQL 13 lets PUBLIC create in public by default; on 18 it is granted again.
      if (major >= 15) await admin.unsafe('GRANT CREATE ON SCHEMA public TO PUBLIC')
      // A trust line and a clear-text password line, for documentation-only networks (RFC 5737).
      const hba_file = (await admin.unsafe<{ hba_file: string }[]>('SHOW hba_file'))[0]!.hba_file
      appendFileSync(hba_file, `\nhost all ${q(HBA_USER)} 192.0.2.0/24 trust\nhost all all 198.51.100.7/32 password\n`)
      await admin.unsafe('SELECT pg_reload_conf()')
      const u = new URL(dsn)
      u.username = 'dbm_monitor'
      u.password = 'mon-pw'
      monitorDsn = u.toString()
      rig = await watchDatabase(monitorDsn)
    })
    afterAll(async () => {
      await rig?.stop()
      await admin?.end({ timeout: 1 }).catch(() => {})
      await server?.stop()
    })

    test('every advisor names its object; what pg_authid hides is said, not an error; the commands are one line each', async () => {
      const all: Record<string, any[]> = Object.fromEntries(
        await Promise.all(RULES.map(async (r) => [r, await rig!.findings(r)] as const)),
      )
      const one = (rule: string, object: string) => {
        const f = (all[rule] as any[]).find((x) => x.key === `${rule}:${object}`)
        expect({ rule, object, found: f !== undefined }).toEqual({ rule, object, found: true })
        return f
      }
      const su = one('pg_superusers', 'superusers')
      expect(su.severity).toBe('warning')
      expect(su.category).toBe('security')
      expect(su.objects).toEqual([`role "su'per */ ü"`])
      expect(su.how_to_fix).toEqual([
        `ALTER ROLE "su'per */ ü" NOSUPERUSER;   -- then GRANT it what it uses (pg_monitor, pg_read_all_data, ...)`,
      ])

      // On 13 the monitoring role cannot read pg_authid: no role is named, and the finding on the setting
      // says why; from 14 pg_read_all_data reads it, and the role with an MD5 hash is named.
      const md5 = one('pg_md5_passwords', 'password_encryption')
      if (major < 14) {
        expect(md5.detail).toContain('not visible to the monitoring role: pg_authid needs a superuser')
        expect(all.pg_md5_passwords!.length).toBe(1)
      } else {
        expect(one('pg_md5_passwords', 'md5 passwords').objects).toEqual([`role "md5'role ü"`])
      }

      const expiring = one('pg_password_expiry', `role U&"exp""iring\\000Arole */"`)
      expect(expiring.severity).toBe('warning')
      expect(expiring.title).toMatch(/expires in \d+ days/)
      expect(one('pg_password_expiry', 'role expired_role').severity).toBe('info')

      const fn = one('pg_definer_search_path', `"sch'ema */ ü".U&"f""n\\000Ax"(a integer, "b'c" text)`)
      // Its owner is the superuser that made it.
      expect(fn.severity).toBe('critical')
      expect(all.pg_definer_search_path!.length).toBe(1)

      const pub = one('pg_public_create', 'schema public')
      expect(pub.detail).toContain(major < 15 ? 'the default before PostgreSQL 15' : 'granted again')

      const trust = (all.pg_hba_methods as any[]).find((f) => f.metrics.auth_method === 'trust')
      expect(trust.severity).toBe('critical')
      expect(trust.detail).toContain(`odd'hba ü`)
      const clear = (all.pg_hba_methods as any[]).find((f) => f.metrics.auth_method === 'password')
      expect(clear.severity).toBe('warning')
      expect(all.pg_hba_methods!.length).toBe(2)

      // Loopback only: ssl off is no finding here.
      expect(all.pg_ssl_off).toEqual([])
      // initdb turns checksums on from PostgreSQL 18.
      expect(all.pg_data_checksums!.map((f: any) => f.severity)).toEqual(major >= 18 ? [] : ['info'])
      // 13 is past its end of life (2025-11-13) and the test binaries are its last minor; 18 is the newest the table knows.
      const version = (all.pg_version_support as any[]).map((f) => f.key)
      if (major === 13) expect(version).toEqual(['pg_version_support:PostgreSQL 13'])
      else expect(version.filter((k) => !k.startsWith('pg_version_support:PostgreSQL 18.'))).toEqual([])

      for (const f of Object.values(all).flat() as any[]) {
        for (const command of [...f.how_to_fix, ...f.how_to_investigate]) expect(command).not.toMatch(/[\n\r\u2028]/)
      }
    })

    test('the investigations and fixes run as written, as a superuser; a new agent then finds nothing left', async () => {
      const findings = (await Promise.all(RULES.map((r) => rig!.findings(r)))).flat() as any[]
      for (const f of findings)
        for (const query of f.how_to_investigate) if (!query.startsWith('--')) await admin.unsafe(query)
      for (const f of findings) {
        if (f.rule === 'pg_version_support' || f.rule === 'pg_data_checksums' || f.rule === 'pg_hba_methods') continue
        for (const fix of f.how_to_fix) {
          if (fix.startsWith('--')) continue
          if (fix.includes('\\gexec')) expect(await gexec(admin, fix)).toBe(1)
          else await admin.unsafe(fix)
        }
      }
      // The hba fix is an edit of the file: done here by making the two lines scram-sha-256, then its reload.
      const hba_file = (await admin.unsafe<{ hba_file: string }[]>('SHOW hba_file'))[0]!.hba_file
      const text = await Bun.file(hba_file).text()
      await Bun.write(
        hba_file,
        text.replace(/ trust\n/g, ' scram-sha-256\n').replace(/ password\n/g, ' scram-sha-256\n'),
      )
      const hbaFix = findings.find((f) => f.rule === 'pg_hba_methods').how_to_fix as string[]
      for (const fix of hbaFix) if (!fix.startsWith('--')) await admin.unsafe(fix)
      await admin.unsafe(`ALTER ROLE ${q(EXPIRED)} NOLOGIN`)
      // The MD5 fix is psql's \\password: a new password set while password_encryption is scram-sha-256.
      await admin.unsafe("SET password_encryption = 'scram-sha-256'")
      await admin.unsafe(`ALTER ROLE ${q(MD5)} PASSWORD 'scram-pw'`)

      await rig!.stop()
      rig = await watchDatabase(monitorDsn)
      for (const rule of [
        'pg_superusers',
        'pg_md5_passwords',
        'pg_password_expiry',
        'pg_definer_search_path',
        'pg_public_create',
        'pg_hba_methods',
      ]) {
        expect({ rule, left: (await rig.findings(rule)).map((f: any) => f.key) }).toEqual({ rule, left: [] })
      }
    })

    test('as a superuser the collector reads MD5 hashes too; a bare role reads neither pg_authid nor pg_hba, and is told so', async () => {
      const ctx = {
        sql: admin,
        now: Date.now(),
        state: new Map(),
        notes: new Map(),
        infos: new Map(),
        major,
        versionNum: major * 10_000,
      } as unknown as PostgresContext
      await admin.unsafe("SET password_encryption = 'md5'")
      await admin.unsafe(`ALTER ROLE ${q(MD5)} PASSWORD 'again-md5'`)
      const { security: status } = await security.collect(ctx)
      expect(status!.md5_roles).toEqual([MD5])
      expect(status!.hba_rules).toEqual([])
      expect(ctx.infos!.size).toBe(0)
      // Within five minutes of a read the collector sends nothing.
      expect(await security.collect(ctx)).toEqual({})

      await admin.unsafe("SET password_encryption = 'scram-sha-256'")
      await admin.unsafe("CREATE ROLE bare LOGIN PASSWORD 'bare-pw'")
      const u = new URL(dsn)
      u.username = 'bare'
      u.password = 'bare-pw'
      const bare = postgres(u.toString(), { max: 1, onnotice: () => {} })
      try {
        const visible = await securityVisibility(bare)
        expect(visible).toEqual({ authid: false, hba: false })
        expect(securityNote(visible, 'bare')).toBe(
          'security: role bare cannot read everything: MD5 password hashes of roles are not checked (pg_authid needs a superuser, or pg_read_all_data from PostgreSQL 14), and pg_hba.conf lines are not checked (GRANT SELECT ON pg_hba_file_rules TO bare, GRANT EXECUTE ON FUNCTION pg_hba_file_rules() TO bare)',
        )
        const bareCtx = { ...ctx, sql: bare, state: new Map(), infos: new Map() } as unknown as PostgresContext
        const { security: seen } = await security.collect(bareCtx)
        expect({ md5: seen!.md5_roles, hba: seen!.hba_rules }).toEqual({ md5: null, hba: null })
        expect([...bareCtx.infos!.values()][0]).toStartWith('security: the role cannot read everything')
      } finally {
        await bare.end({ timeout: 1 })
      }
    })
  })
}
