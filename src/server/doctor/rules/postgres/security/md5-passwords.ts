// MD5 passwords: `password_encryption = md5` stores every new password as an MD5 hash, and roles whose
// stored password is one (pg_authid, readable by superusers and, from PostgreSQL 14, members of
// pg_read_all_data). An MD5 hash is the password as far as
// the protocol goes (whoever reads it can log in; PostgreSQL 18 deprecates MD5 passwords, a later release
// removes them); SCRAM-SHA-256 stores a salted verifier and never sends the password. When the
// monitoring role cannot read pg_authid, the finding on the setting says so instead of naming roles.
import { commentText, pgIdent, pgString } from '../../../sql-text.ts'
import type { FindingDraft, Rule } from '../../../types.ts'

const defaults = {}

const MAX_NAMED = 50

export const md5Passwords: Rule<typeof defaults> = {
  id: 'pg_md5_passwords',
  engine: 'postgres',
  category: 'security',
  summary:
    'password_encryption = md5, and roles whose stored password is an MD5 hash (where pg_authid is readable: a superuser or pg_read_all_data; the finding says when it is not).',
  collectors: ['security'],
  thresholds: defaults,
  async check(ctx) {
    const found = await ctx.security()
    if (!found) return []
    const s = found.status
    const findings: FindingDraft[] = []
    const unseen =
      s.md5_roles === null
        ? ' Which roles already hold an MD5 hash is not visible to the monitoring role: pg_authid needs a superuser, or pg_read_all_data from PostgreSQL 14 (the query below, run as a superuser, lists them).'
        : ''
    if (s.password_encryption?.trim().toLowerCase() === 'md5') {
      findings.push({
        severity: 'warning',
        object: 'password_encryption',
        title: 'password_encryption = md5: new passwords are stored as MD5 hashes',
        detail:
          'password_encryption is md5, so every password set from now on is stored as an MD5 hash of the password and the role name. Whoever reads such a hash (a backup, a replica, pg_authid) can log in with it, and MD5 authentication is open to replay and timing attacks; ' +
          `PostgreSQL 18 deprecates MD5 passwords and a later release removes them. SCRAM-SHA-256 (the default since PostgreSQL 14) stores a salted verifier instead.${unseen}`,
        recommendation:
          "Set password_encryption to scram-sha-256, then set each MD5 password again (the role's owner or a superuser, with \\password in psql) so it is stored as SCRAM. pg_hba lines with md5 accept SCRAM passwords too, so clients keep working; switch them to scram-sha-256 once no MD5 password is left.",
        how_to_investigate: [
          "SELECT name, setting, source, sourcefile, sourceline FROM pg_settings WHERE name = 'password_encryption';",
          "SELECT rolname FROM pg_authid WHERE rolpassword LIKE 'md5%' ORDER BY 1;   -- as a superuser",
        ],
        how_to_fix: ["ALTER SYSTEM SET password_encryption = 'scram-sha-256';", 'SELECT pg_reload_conf();'],
        metrics: {
          password_encryption: s.password_encryption,
          md5_roles: s.md5_roles === null ? null : s.md5_roles.length,
        },
        as_of: found.ts,
      })
    }
    if (s.md5_roles && s.md5_roles.length > 0) {
      const named = s.md5_roles.slice(0, MAX_NAMED)
      const names = named.map((n) => pgIdent(n))
      findings.push({
        severity: 'warning',
        object: 'md5 passwords',
        objects: named.map((n) => `role ${pgIdent(n)}`),
        title: `${s.md5_roles.length} role${s.md5_roles.length === 1 ? ' has its' : 's have their'} password stored as an MD5 hash: ${names.slice(0, 5).join(', ')}${s.md5_roles.length > 5 ? ', ...' : ''}`,
        detail:
          `The stored password of ${names.join(', ')}${s.md5_roles.length > named.length ? ', ...' : ''} is an MD5 hash: whoever reads it can log in as the role, and PostgreSQL 18 deprecates MD5 passwords (a later release refuses them). ` +
          'Setting the password again while password_encryption is scram-sha-256 stores a SCRAM verifier instead.',
        recommendation:
          'With password_encryption = scram-sha-256, set each password again (\\password in psql hashes it on the client) and update the clients that use it; clients on libpq 10 or newer speak SCRAM.',
        how_to_investigate: [
          `SELECT rolname, rolcanlogin, rolvaliduntil FROM pg_roles WHERE rolname IN (${named.map((n) => pgString(n)).join(', ')});`,
          "SELECT rolname FROM pg_authid WHERE rolpassword LIKE 'md5%' ORDER BY 1;   -- as a superuser",
        ],
        how_to_fix: [
          "SET password_encryption = 'scram-sha-256';   -- then in the same psql session, for each role: \\password <role>",
          ...named.map((n) => `-- ${commentText(`\\password ${pgIdent(n)}`)}`),
        ],
        metrics: { md5_roles: s.md5_roles.length },
        as_of: found.ts,
      })
    }
    return findings
  },
}
