// Bursts of failed logins in the server log (auth_failed entries: password, ident, peer or cert
// authentication failed, or no pg_hba.conf entry) over the last 10 minutes, exact from the log's counts.
// A burst is a client with a wrong or expired password retrying (a deploy with a stale secret, a
// rotated password), or someone guessing passwords; either way the server forks a backend for each
// attempt. Warning at 20 in 10 minutes, critical at 200. Names the user and client that failed most.
import { pgString } from '../../sql-text.ts'
import type { Rule } from '../../types.ts'
import { countOf, logCounts, logEntries, logExcerpt, textField } from './log-evidence.ts'

const defaults = {
  window_minutes: 10,
  warning_count: 20,
  critical_count: 200,
}

const MINUTE = 60_000

export const logAuthFailures: Rule<typeof defaults> = {
  id: 'pg_log_auth_failures',
  summary: 'Bursts of failed logins in the server log, naming the user and client that failed most.',
  collectors: ['log_events'],
  engine: 'postgres',
  category: 'availability',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(logAuthFailures)
    const windowMs = t.window_minutes * MINUTE
    const end = Math.floor(ctx.now / MINUTE) * MINUTE + MINUTE
    const count = countOf(await logCounts(ctx, end - windowMs, end), 'auth_failed')
    const severity = count >= t.critical_count ? 'critical' : count >= t.warning_count ? 'warning' : undefined
    if (!severity) return []
    const entries = await logEntries(ctx, ['auth_failed'], windowMs)
    const pairs = new Map<
      string,
      { user: string | null; client: string | null; count: number; method: string | null; message: string }
    >()
    for (const e of entries) {
      // The client's address without its port: one client reconnects from many ports.
      const client = e.client === null ? null : e.client.replace(/(\(\d+\)|:\d+)$/, '')
      const key = JSON.stringify([e.user, client])
      const p = pairs.get(key) ?? { user: e.user, client, count: 0, method: textField(e, 'method'), message: e.message }
      p.count += e.count
      pairs.set(key, p)
    }
    const ranked = [...pairs.values()].sort((a, b) => b.count - a.count)
    const top = ranked[0]
    const who = (p: { user: string | null; client: string | null; count: number }) =>
      `user ${p.user === null ? '(not logged)' : pgString(p.user)} from ${p.client === null ? '(client not logged)' : p.client} (${p.count})`
    return [
      {
        severity,
        ...(top?.user ? { object: top.user } : {}),
        objects: ranked.slice(0, 5).flatMap((p) => (p.user ? [`user ${p.user}`] : [])),
        title: `${count} failed logins in ${t.window_minutes} minutes${top?.user ? ` (most for user ${logExcerpt(top.user, 60)})` : ''}`,
        detail:
          `The server logged ${count} failed authentications in the last ${t.window_minutes} minutes.` +
          (ranked.length > 0
            ? ` Among the ${entries.length} entries read, the most: ${ranked.slice(0, 3).map(who).join('; ')}.`
            : '') +
          (top ? ` The server said: "${logExcerpt(top.message)}"${top.method ? ` (method ${top.method})` : ''}.` : ''),
        recommendation:
          'If the client is yours, give it the right password (a rotated secret not deployed, an expired role: VALID UNTIL) or a pg_hba.conf entry; if it is not, block the address ' +
          'at the firewall or in pg_hba.conf (reject), and make sure the role has a strong password or uses certificates. Each attempt costs the server a process start.',
        how_to_investigate: [
          'SELECT line_number, type, database, user_name, address, auth_method, error FROM pg_hba_file_rules;',
          ...(top?.user
            ? [`SELECT rolname, rolcanlogin, rolvaliduntil FROM pg_roles WHERE rolname = ${pgString(top.user)};`]
            : []),
          "SELECT name, setting FROM pg_settings WHERE name IN ('password_encryption', 'log_connections', 'authentication_timeout');",
        ],
        how_to_fix: [],
        metrics: {
          failed_logins: count,
          entries_read: entries.length,
          top_user: top?.user ?? null,
          top_client: top?.client ?? null,
          top_count: top?.count ?? null,
        },
      },
    ]
  },
}
