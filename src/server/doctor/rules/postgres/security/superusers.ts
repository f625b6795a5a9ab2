// Superusers beyond the bootstrap role (the one initdb made, oid 10; pgwatch's reco_superusers, PMM's
// advisor): a superuser bypasses every permission check and can run programs on the host (COPY ... TO
// PROGRAM), so each one more is one more password or key that gives away the whole server. An operator
// who means a second one (a separate administrator) names it in the database's `allowed_names` list
// (its thresholds: API or Settings page), or raises `allowed_superusers`, a count of unnamed ones; the
// finding then comes only for the others, past that count. Role names are the server's text: quoted
// through sql-text.ts.
import { commentText, pgIdent, pgString } from '../../../sql-text.ts'
import type { Rule } from '../../../types.ts'

const defaults = {
  /** Superusers besides the bootstrap role and the allowed names that are meant: a finding only past this many. */
  allowed_superusers: 0,
}

const lists = {
  /** Superusers an operator means (a second administrator), by role name as the server spells it: never a finding. */
  allowed_names: [] as readonly string[],
}

/** Roles named in one finding's commands. */
const MAX_NAMED = 50

export const superusers: Rule<typeof defaults, typeof lists> = {
  id: 'pg_superusers',
  engine: 'postgres',
  category: 'security',
  summary:
    'Superusers beyond the bootstrap role and the allowed names (allowed_names), more than allowed_superusers, each with the command that takes the right away.',
  collectors: ['security'],
  thresholds: defaults,
  ranges: { allowed_superusers: { min: 0, max: 1000, whole: true } },
  lists,
  async check(ctx) {
    const t = ctx.thresholds(superusers)
    const allowed = new Set(ctx.names(superusers).allowed_names)
    const found = await ctx.security()
    if (!found) return []
    const extra = found.status.roles.filter((r) => r.superuser && !r.bootstrap && !allowed.has(r.name))
    if (extra.length <= t.allowed_superusers) return []
    const named = extra.slice(0, MAX_NAMED)
    const names = named.map((r) => pgIdent(r.name))
    const login = extra.filter((r) => r.can_login).length
    return [
      {
        severity: 'warning',
        object: 'superusers',
        objects: named.map((r) => `role ${pgIdent(r.name)}`),
        title: `${extra.length} superuser${extra.length === 1 ? '' : 's'} besides the bootstrap role: ${names.slice(0, 5).join(', ')}${extra.length > 5 ? ', ...' : ''}`,
        detail:
          `Besides the role initdb made${allowed.size > 0 ? ' and the allowed ones' : ''}, ${extra.length} role${extra.length === 1 ? ' is a superuser' : 's are superusers'} (${names.join(', ')}${extra.length > named.length ? ', ...' : ''}), ${login} of them able to log in. ` +
          "A superuser bypasses every permission check and can read and write files and run programs on the host as the server's operating-system user, so each one more is one more password that gives away the whole server. " +
          `${t.allowed_superusers > 0 ? `The threshold allows ${t.allowed_superusers}. ` : ''}An application or a monitoring tool rarely needs one: the predefined roles (pg_monitor, pg_read_all_data, pg_write_all_data, pg_signal_backend, pg_checkpoint) give the usual parts.`,
        recommendation:
          "Take the superuser right from the roles that do not need it and grant them what they do use instead; a second administrator you mean to keep goes in this database's allowed_names list of pg_superusers (Settings → Doctor thresholds, or PUT /api/v1/databases/{id}/thresholds).",
        how_to_investigate: [
          'SELECT rolname, rolcanlogin, rolreplication, rolbypassrls, rolvaliduntil, oid = 10 AS bootstrap FROM pg_roles WHERE rolsuper ORDER BY rolname;',
          `SELECT usename, client_addr, application_name, backend_start FROM pg_stat_activity WHERE usename IN (${named.map((r) => pgString(r.name)).join(', ')});   -- who uses them now`,
        ],
        how_to_fix: named.map(
          (r) =>
            `ALTER ROLE ${pgIdent(r.name)} NOSUPERUSER;   -- ${commentText(`then GRANT it what it uses (pg_monitor, pg_read_all_data, ...)`)}`,
        ),
        metrics: {
          superusers: extra.length,
          allowed_superusers: t.allowed_superusers,
          allowed_names: allowed.size,
          login_superusers: login,
        },
        as_of: found.ts,
      },
    ]
  },
}
