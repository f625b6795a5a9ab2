// ssl = off on a server that listens beyond loopback (listen_addresses other than localhost, 127.x and
// ::1; empty means the local socket only): every TCP connection, passwords of the `password` method and
// all data included, crosses the network unencrypted, and clients cannot require TLS (sslmode=require
// fails). A server on loopback only is no finding: nothing leaves the host.
import { commentText, pgString } from '../../../sql-text.ts'
import type { Rule } from '../../../types.ts'

const defaults = {}

/** The listen_addresses entries that are not loopback ('*' and 0.0.0.0 are every interface). */
export function beyondLoopback(listen: string): string[] {
  return listen
    .split(',')
    .map((a) => a.trim())
    .filter((a) => a !== '' && a.toLowerCase() !== 'localhost' && !/^127\./.test(a) && a !== '::1')
}

export const sslOff: Rule<typeof defaults> = {
  id: 'pg_ssl_off',
  engine: 'postgres',
  category: 'security',
  summary:
    'ssl = off on a server that listens beyond loopback (listen_addresses): connections cross the network unencrypted.',
  collectors: ['security'],
  thresholds: defaults,
  async check(ctx) {
    const found = await ctx.security()
    const s = found?.status
    if (!found || !s || s.ssl?.trim().toLowerCase() !== 'off' || s.listen_addresses === null) return []
    const beyond = beyondLoopback(s.listen_addresses)
    if (beyond.length === 0) return []
    const shown = commentText(beyond.join(', '), 200)
    return [
      {
        severity: 'warning',
        object: 'ssl',
        title: `ssl is off on a server listening on ${shown}`,
        detail:
          `ssl = off while listen_addresses is ${commentText(s.listen_addresses, 200)}: every TCP connection from beyond the host, its queries, results and any password sent with the password method, crosses the network unencrypted, ` +
          'and a client that asks for TLS (sslmode=require or verify-full) cannot connect.',
        recommendation:
          'Give the server a certificate and key (ssl_cert_file, ssl_key_file; a certificate for the name clients use, so that they can verify it with sslmode=verify-full), turn ssl on (a reload is enough), then require it with hostssl lines in pg_hba.conf. If no client should come from the network, set listen_addresses to localhost instead (a restart).',
        how_to_investigate: [
          `SELECT name, setting, source FROM pg_settings WHERE name IN (${['ssl', 'listen_addresses', 'ssl_cert_file', 'ssl_key_file', 'ssl_min_protocol_version'].map(pgString).join(', ')});`,
          'SELECT ssl, count(*) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) WHERE client_addr IS NOT NULL GROUP BY ssl;   -- connections with and without TLS',
        ],
        how_to_fix: [
          '-- put the certificate and key where ssl_cert_file and ssl_key_file point (server.crt and server.key in the data directory by default), then:',
          'ALTER SYSTEM SET ssl = on;',
          'SELECT pg_reload_conf();',
        ],
        metrics: { ssl: s.ssl, listen_addresses: s.listen_addresses },
        as_of: found.ts,
      },
    ]
  },
}
