// pg_hba.conf lines with `trust` (no password at all: whoever reaches the server may log in as any role
// the line covers, superusers included) or `password` (the password crosses the network in clear text),
// read from pg_hba_file_rules where the monitoring role may (a superuser, or GRANT SELECT on the view and
// EXECUTE on its function; without them the collector sends none and notes it). Severity: trust from
// beyond the host (a network address, all, samenet) is critical; trust on the local socket or loopback
// a warning (any operating-system user of the host gets in); clear-text password over a connection that
// may be unencrypted (host, hostnossl) a warning, over hostssl or the local socket info. The fix is an
// edit of the file and a reload: the line is named by its number, the rest is comment text.
import type { HbaRule } from '../../../../../shared/wire.ts'
import { commentText } from '../../../sql-text.ts'
import type { FindingDraft, Rule, Severity } from '../../../types.ts'

const defaults = {
  /** Lines named one finding each. */
  max_findings: 20,
}

/** An address a pg_hba line names that only the host itself can come from. */
export function loopbackOnly(rule: HbaRule): boolean {
  if (rule.type === 'local') return true
  const a = (rule.address ?? '').trim().toLowerCase()
  if (a === 'localhost' || a === 'samehost') return true
  if (/^127\./.test(a)) return rule.netmask === null || /^255\./.test(rule.netmask)
  return a === '::1' || a === '::1/128'
}

function severityOf(rule: HbaRule): Severity {
  if (rule.auth_method === 'trust') return loopbackOnly(rule) ? 'warning' : 'critical'
  return rule.type === 'hostssl' || rule.type === 'local' ? 'info' : 'warning'
}

const list = (names: string[]) => commentText(names.join(','), 120)

export const hbaMethods: Rule<typeof defaults> = {
  id: 'pg_hba_methods',
  engine: 'postgres',
  category: 'security',
  summary:
    'pg_hba.conf lines with trust (no password) or password (clear text), where pg_hba_file_rules is readable (a superuser, or a GRANT on the view and its function).',
  collectors: ['security'],
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(hbaMethods)
    const found = await ctx.security()
    if (!found?.status.hba_rules) return []
    const findings: FindingDraft[] = []
    for (const rule of found.status.hba_rules.slice(0, t.max_findings)) {
      const trust = rule.auth_method === 'trust'
      const from =
        rule.type === 'local'
          ? 'the local socket'
          : `${commentText(rule.address ?? 'any address', 100)}${rule.netmask ? `/${commentText(rule.netmask, 40)}` : ''}`
      const line = `${rule.type} ${list(rule.database)} ${list(rule.user_name)}${rule.type === 'local' ? '' : ` ${from}`} ${rule.auth_method}`
      const severity = severityOf(rule)
      findings.push({
        severity,
        object: `pg_hba.conf line ${rule.line_number}`,
        title: trust
          ? `pg_hba.conf line ${rule.line_number} lets clients from ${from} in without a password (trust)`
          : `pg_hba.conf line ${rule.line_number} takes passwords in clear text (password) from ${from}`,
        detail:
          `Line ${rule.line_number} of pg_hba.conf reads: ${line} (databases ${list(rule.database)}, roles ${list(rule.user_name)}). ` +
          (trust
            ? `trust lets whoever connects this way log in as any role the line covers, superusers included, with no password${loopbackOnly(rule) ? ': on this line any user of the database host' : ', from the network'}.`
            : `password sends the password itself to the server${rule.type === 'hostssl' ? ' (inside TLS here)' : rule.type === 'local' ? ' (over the local socket here)' : ', unencrypted unless the client happens to use TLS'}; scram-sha-256 proves it without sending it.`),
        recommendation: trust
          ? 'Replace trust with scram-sha-256 (or peer for the local socket, cert for certificates) and reload; give the roles that used it passwords first.'
          : "Replace password with scram-sha-256 (the roles' passwords must be stored as SCRAM: see pg_md5_passwords) and reload.",
        how_to_investigate: [
          `SELECT line_number, type, database, user_name, address, netmask, auth_method, options FROM pg_hba_file_rules WHERE line_number = ${rule.line_number};`,
          'SHOW hba_file;',
        ],
        how_to_fix: [
          `-- ${commentText(`in pg_hba.conf, line ${rule.line_number}: change ${rule.auth_method} to ${trust && rule.type === 'local' ? 'peer or scram-sha-256' : 'scram-sha-256'}`)}`,
          'SELECT pg_reload_conf();',
          'SELECT line_number, error FROM pg_hba_file_rules WHERE error IS NOT NULL;   -- the file as read again: no errors',
        ],
        metrics: { line_number: rule.line_number, auth_method: rule.auth_method, type: rule.type },
        as_of: found.ts,
      })
    }
    return findings
  },
}
