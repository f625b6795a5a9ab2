// Login roles whose password expired or expires soon (pg_roles.rolvaliduntil, readable by every role):
// once it passes, every login with the password fails (other methods such as peer or certificates still
// work). Expiring within `warning_days`: a warning, so the password is changed or the date moved before
// the application stops; expired already: info (a role deliberately shut out looks the same; if it is
// still used, its logins are failing now). Role names are the server's text: quoted through sql-text.ts.
import { pgIdent, pgString } from '../../../sql-text.ts'
import type { FindingDraft, Rule } from '../../../types.ts'

const defaults = {
  /** A password expiring within this many days is a warning. */
  warning_days: 14,
  /** Roles named one finding each. */
  max_findings: 20,
}

const DAY = 86_400_000
const date = (ms: number) => new Date(ms).toISOString().slice(0, 10)

export const passwordExpiry: Rule<typeof defaults> = {
  id: 'pg_password_expiry',
  engine: 'postgres',
  category: 'security',
  summary:
    'Login roles whose password expired (info) or expires within days (warning), from rolvaliduntil, with the command that moves the date.',
  collectors: ['security'],
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(passwordExpiry)
    const found = await ctx.security()
    if (!found) return []
    const due = found.status.roles
      .filter((r) => r.can_login && r.valid_until !== null && r.valid_until <= ctx.now + t.warning_days * DAY)
      .sort((a, b) => (a.valid_until ?? 0) - (b.valid_until ?? 0))
    const findings: FindingDraft[] = []
    for (const r of due.slice(0, t.max_findings)) {
      const until = r.valid_until!
      const expired = until <= ctx.now
      const days = Math.abs(until - ctx.now) / DAY
      const role = pgIdent(r.name)
      const inDays = days < 1 ? `${Math.max(1, Math.round(days * 24))} h` : `${Math.round(days)} days`
      findings.push({
        severity: expired ? 'info' : 'warning',
        object: `role ${role}`,
        title: expired
          ? `The password of role ${role} expired on ${date(until)}`
          : `The password of role ${role} expires in ${inDays} (${date(until)})`,
        detail:
          `Role ${role} can log in and its password is valid until ${new Date(until).toISOString()} (rolvaliduntil)${r.superuser ? '; it is a superuser' : ''}. ` +
          (expired
            ? `Since then every login with its password fails (peer, certificate and other methods still work). If the role was shut out on purpose, nothing is wrong; if it is still used, its logins are failing now.`
            : `In ${inDays} every login with its password starts failing, which stops whatever application or job logs in as it.`),
        recommendation:
          'Set a new password before the date and move the date (or remove it), then update the clients that use the role; if the role is no longer used, drop it or make it NOLOGIN.',
        how_to_investigate: [
          `SELECT rolname, rolcanlogin, rolvaliduntil FROM pg_roles WHERE rolname = ${pgString(r.name)};`,
          `SELECT count(*) FROM pg_stat_activity WHERE usename = ${pgString(r.name)};   -- sessions of the role now`,
        ],
        how_to_fix: [
          `ALTER ROLE ${role} VALID UNTIL 'infinity';   -- or a new date, with a new password (\\password in psql)`,
        ],
        metrics: { valid_until: date(until), days_left: Math.round(((until - ctx.now) / DAY) * 10) / 10 },
        as_of: found.ts,
      })
    }
    if (due.length > t.max_findings) {
      const rest = due.slice(t.max_findings)
      findings.push({
        severity: rest.some((r) => r.valid_until! > ctx.now) ? 'warning' : 'info',
        title: `${rest.length} more login roles whose password expired or expires within ${t.warning_days} days`,
        detail: `Besides the roles named above, ${rest.length} more login roles have a password that expired or expires within ${t.warning_days} days.`,
        recommendation: 'Move their dates or set new passwords; make the unused ones NOLOGIN.',
        how_to_investigate: [
          `SELECT rolname, rolvaliduntil FROM pg_roles WHERE rolcanlogin AND rolvaliduntil < now() + interval '${t.warning_days} days' ORDER BY rolvaliduntil;`,
        ],
        how_to_fix: [],
        objects: rest.slice(0, 100).map((r) => `role ${pgIdent(r.name)}`),
        metrics: { roles: rest.length },
        as_of: found.ts,
      })
    }
    return findings
  },
}
