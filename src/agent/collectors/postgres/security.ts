// security: what the doctor's security and configuration advisors judge, read every few minutes (it
// changes rarely): superusers and expiring passwords (pg_roles), password_encryption, ssl,
// listen_addresses and data_checksums (pg_settings), SECURITY DEFINER functions without a search_path
// of their own (pg_proc.proconfig), schemas where PUBLIC may create objects (pg_namespace's ACL), MD5
// password hashes (pg_authid: superusers, and pg_read_all_data from PostgreSQL 14) and the `trust` and `password` lines of pg_hba.conf
// (pg_hba_file_rules: superusers, or a GRANT). A part the role may not read is sent as null with an info
// note (the documented monitoring role is not a superuser: that is expected, not a fault). A handful of
// small catalog reads; names are the server's text and travel as they are (the doctor quotes them).
import type postgres from 'postgres'
import { ingestMaxItems } from '../../../shared/ingest-limits.ts'
import { pgIdent } from '../../../shared/sql-text.ts'
import type { DefinerFunction, HbaRule, SecurityRole, SecurityStatus } from '../../../shared/wire.ts'
import type { PostgresContext } from '../types.ts'
import { registerCollector } from '../registry.ts'

/** How often the catalogs are read again (the first cycle after a start always reads them). */
export const SECURITY_INTERVAL_MS = 5 * 60_000

const LIMIT = ingestMaxItems.security_items

/** What the role may read: pg_authid (a superuser, or pg_read_all_data) and pg_hba_file_rules (superuser or a GRANT on the view and its function). */
export async function securityVisibility(sql: postgres.Sql): Promise<{ authid: boolean; hba: boolean }> {
  const [row] = await sql.unsafe<{ authid: boolean; hba: boolean }[]>(
    `SELECT has_table_privilege('pg_catalog.pg_authid', 'SELECT') AS authid,
            has_table_privilege('pg_catalog.pg_hba_file_rules', 'SELECT') AND has_function_privilege('pg_catalog.pg_hba_file_rules()', 'EXECUTE') AS hba`,
  )
  return { authid: row!.authid, hba: row!.hba }
}

/** What the role cannot read, as one note (no `;`: `--check` separates its notes with it); undefined when it reads everything. */
export function securityNote(visible: { authid: boolean; hba: boolean }, role?: string): string | undefined {
  const who = role ? `role ${pgIdent(role)}` : 'the role'
  const parts: string[] = []
  if (!visible.authid)
    parts.push(
      'MD5 password hashes of roles are not checked (pg_authid needs a superuser, or pg_read_all_data from PostgreSQL 14)',
    )
  if (!visible.hba) {
    const to = role ? pgIdent(role) : 'dbm_monitor'
    parts.push(
      `pg_hba.conf lines are not checked (GRANT SELECT ON pg_hba_file_rules TO ${to}, GRANT EXECUTE ON FUNCTION pg_hba_file_rules() TO ${to})`,
    )
  }
  return parts.length ? `security: ${who} cannot read everything: ${parts.join(', and ')}` : undefined
}

const SETTINGS = `
  SELECT max(setting) FILTER (WHERE name = 'password_encryption') AS password_encryption,
         max(setting) FILTER (WHERE name = 'ssl') AS ssl,
         max(setting) FILTER (WHERE name = 'listen_addresses') AS listen_addresses,
         max(setting) FILTER (WHERE name = 'data_checksums') AS data_checksums
  FROM pg_settings WHERE name IN ('password_encryption', 'ssl', 'listen_addresses', 'data_checksums')`

// rolvaliduntil as epoch ms, clamped to what the wire carries (-infinity and dates before 1970 as 0).
const ROLES = `
  SELECT rolname AS name, rolsuper AS superuser, oid = 10 AS bootstrap, rolcanlogin AS can_login,
         CASE WHEN rolvaliduntil IS NULL OR rolvaliduntil = 'infinity' THEN NULL
              ELSE floor(extract(epoch FROM least(greatest(rolvaliduntil, 'epoch'), '9999-12-31')) * 1000)::float8 END AS valid_until
  FROM pg_roles
  WHERE rolsuper OR (rolcanlogin AND rolvaliduntil IS NOT NULL AND rolvaliduntil <> 'infinity')
  ORDER BY rolsuper DESC, rolname LIMIT $1`

const MD5_ROLES = `SELECT rolname AS name FROM pg_authid WHERE rolpassword LIKE 'md5%' ORDER BY rolname LIMIT $1`

// Functions of extensions are left out: their search_path is the extension's to fix (ALTER EXTENSION ... UPDATE).
const DEFINER_FUNCTIONS = `
  SELECT n.nspname AS schema, p.proname AS name, pg_get_function_identity_arguments(p.oid) AS args,
         pg_get_userbyid(p.proowner) AS owner, coalesce(r.rolsuper, false) AS owner_superuser
  FROM pg_proc p
  JOIN pg_namespace n ON n.oid = p.pronamespace
  LEFT JOIN pg_roles r ON r.oid = p.proowner
  WHERE p.prosecdef
    AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\\_%'
    AND NOT EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search\\_path=%')
    AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
  ORDER BY coalesce(r.rolsuper, false) DESC, n.nspname, p.proname, 3 LIMIT $1`

// The ACL of a schema never granted anything is its owner's default (acldefault), which gives PUBLIC nothing.
const PUBLIC_CREATE = `
  SELECT n.nspname AS schema FROM pg_namespace n
  WHERE n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\\_%'
    AND EXISTS (SELECT 1 FROM aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner))) a WHERE a.grantee = 0 AND a.privilege_type = 'CREATE')
  ORDER BY 1 LIMIT $1`

const HBA = `
  SELECT line_number, type, database, user_name, address, netmask, auth_method FROM pg_hba_file_rules
  WHERE auth_method IN ('trust', 'password') AND error IS NULL ORDER BY line_number LIMIT $1`

export const security = registerCollector<PostgresContext>({
  name: 'security',
  engine: 'postgres',
  defaultEnabled: true,
  async checkNotes({ sql }) {
    const [who] = await sql`SELECT current_user AS role`
    const note = securityNote(await securityVisibility(sql), String(who!.role))
    return note ? [note] : []
  },
  async collect(ctx) {
    const last = ctx.state.get('read_at')
    if (typeof last === 'number' && ctx.now - last < SECURITY_INTERVAL_MS && ctx.now >= last) return {}
    const visible = await securityVisibility(ctx.sql)
    const [settings] = await ctx.sql.unsafe<Record<string, string | null>[]>(SETTINGS)
    const roles = await ctx.sql.unsafe<SecurityRole[]>(ROLES, [LIMIT])
    const md5 = visible.authid
      ? (await ctx.sql.unsafe<{ name: string }[]>(MD5_ROLES, [LIMIT])).map((r) => r.name)
      : null
    const functions = await ctx.sql.unsafe<DefinerFunction[]>(DEFINER_FUNCTIONS, [LIMIT])
    const schemas = await ctx.sql.unsafe<{ schema: string }[]>(PUBLIC_CREATE, [LIMIT])
    const hba = visible.hba ? await ctx.sql.unsafe<HbaRule[]>(HBA, [LIMIT]) : null
    const note = securityNote(visible)
    if (note) ctx.infos?.set('security', note)
    else ctx.infos?.delete('security')
    ctx.state.set('read_at', ctx.now)
    const status: SecurityStatus = {
      password_encryption: settings?.password_encryption ?? null,
      ssl: settings?.ssl ?? null,
      listen_addresses: settings?.listen_addresses ?? null,
      data_checksums: settings?.data_checksums ?? null,
      roles: roles.map((r) => ({
        name: r.name,
        superuser: r.superuser,
        bootstrap: r.bootstrap,
        can_login: r.can_login,
        valid_until: r.valid_until === null ? null : Number(r.valid_until),
      })),
      md5_roles: md5,
      definer_functions: functions.map((f) => ({
        schema: f.schema,
        name: f.name,
        args: f.args,
        owner: f.owner,
        owner_superuser: f.owner_superuser,
      })),
      public_create_schemas: schemas.map((s) => s.schema),
      hba_rules:
        hba?.map((h) => ({
          line_number: Number(h.line_number),
          type: h.type,
          database: [...(h.database ?? [])].slice(0, LIMIT),
          user_name: [...(h.user_name ?? [])].slice(0, LIMIT),
          address: h.address ?? null,
          netmask: h.netmask ?? null,
          auth_method: h.auth_method,
        })) ?? null,
    }
    return { security: status }
  },
})
