// ClickHouse's users (collected by `security` from system.users): a user without a password (auth_type
// no_password or no_authentication) lets in whoever reaches the server's ports and names it, critical
// when the user is open to every network (host_ip ::/0, a host regexp `.*`, a LIKE `%`), a warning when
// its hosts are restricted; a user with a password but open to every network is a note (its password is
// then the only barrier, from anywhere). One finding per cause: a user without a password is left out
// of the second rule. The fix depends on where the user is defined: SQL users (local_directory,
// replicated) take ALTER USER, users.xml users are edited in the file (its storage is read-only to SQL).
// Names are the server's text: quoted with chIdent, comments through commentText.
import type { ClickHouseUser } from '../../../../shared/wire.ts'
import { chIdent, commentText } from '../../sql-text.ts'
import type { FindingDraft, Rule } from '../../types.ts'

const defaults = {}

/** Users named in one finding's commands. */
const MAX_NAMED = 50

const ANY_IP = new Set(['::/0', '0.0.0.0/0', '::ffff:0.0.0.0/96'])

/** The user may connect from every network: an allowed address range that is everything, or a name pattern that matches every host. */
export function openToEveryNetwork(u: ClickHouseUser): boolean {
  return (
    u.host_ip.some((ip) => ANY_IP.has(ip.trim())) ||
    u.host_names_regexp.some((r) => ['.*', '^.*$', '.+', '^.*'].includes(r.trim())) ||
    u.host_names_like.some((l) => l.trim() === '%')
  )
}

/** Logs in without a password. */
export const withoutPassword = (u: ClickHouseUser) =>
  u.auth_type.some((a) => a === 'no_password' || a === 'no_authentication')

/** users.xml's users are read-only to SQL: edited in the file (or in a file of users.d/). */
const inUsersXml = (u: ClickHouseUser) => u.storage === 'users_xml'

const hostsOf = (u: ClickHouseUser) => {
  const all = [
    ...u.host_ip,
    ...u.host_names,
    ...u.host_names_regexp.map((r) => `REGEXP ${r}`),
    ...u.host_names_like.map((l) => `LIKE ${l}`),
  ]
  return all.length === 0 ? 'no host' : all.slice(0, 5).join(', ') + (all.length > 5 ? ', ...' : '')
}

const listed = (names: string[], total: number) => `${names.slice(0, 5).join(', ')}${total > 5 ? ', ...' : ''}`

const INVESTIGATE = [
  'SELECT name, storage, auth_type, host_ip, host_names, host_names_regexp, host_names_like FROM system.users ORDER BY name;',
  "SELECT user, address, interface, count() AS logins, max(event_time) AS last_login FROM system.session_log WHERE type = 'LoginSuccess' AND event_date >= today() - 7 GROUP BY user, address, interface ORDER BY logins DESC LIMIT 50;   -- who uses them, from where (session_log enabled)",
]

function passwordFix(u: ClickHouseUser): string[] {
  if (inUsersXml(u)) {
    return [
      `-- ${commentText(`users.xml: in <users><${u.name}>, replace <no_password/> or the empty <password> with <password_sha256_hex> of a new password (echo -n '<new password>' | sha256sum), then restart or wait for the reload`, 400)}`,
    ]
  }
  return [
    `ALTER USER ${chIdent(u.name)} IDENTIFIED WITH sha256_password BY '<new password>';   -- then give it to the clients that log in as ${commentText(u.name, 100)}`,
  ]
}

function hostFix(u: ClickHouseUser): string[] {
  if (inUsersXml(u)) {
    return [
      `-- ${commentText(`users.xml: in <users><${u.name}><networks>, replace ::/0 with the clients' networks (<ip>10.0.0.0/8</ip>, <host>app.example.com</host>)`, 400)}`,
    ]
  }
  return [
    `ALTER USER ${chIdent(u.name)} HOST NAME '<client host name>';   -- or HOST IP '10.0.0.0/8' for a network, several separated by commas; LOCAL for this machine only`,
  ]
}

export const usersWithoutPassword: Rule<typeof defaults> = {
  id: 'ch_users_without_password',
  engine: 'clickhouse',
  category: 'security',
  summary:
    'ClickHouse users that log in without a password (no_password): critical when open to every network, with the ALTER USER or users.xml change that sets one.',
  collectors: ['security'],
  thresholds: defaults,
  async check(ctx) {
    const found = await ctx.clickhouseUsers()
    if (!found || found.status.users === null) return []
    const without = found.status.users.filter(withoutPassword)
    const findings: FindingDraft[] = []
    for (const open of [true, false]) {
      const users = without.filter((u) => openToEveryNetwork(u) === open)
      if (users.length === 0) continue
      const named = users.slice(0, MAX_NAMED)
      const names = named.map((u) => chIdent(u.name))
      const one = users.length === 1
      findings.push({
        severity: open ? 'critical' : 'warning',
        object: open ? 'users without a password, open to every network' : 'users without a password',
        objects: named.map((u) => `user ${chIdent(u.name)}`),
        title: `${users.length} ClickHouse user${one ? '' : 's'} without a password${open ? ', open to every network' : ''}: ${listed(names, users.length)}`,
        detail:
          `${named.map((u) => `${chIdent(u.name)} (${u.storage}, from ${hostsOf(u)})`).join(', ')}${users.length > named.length ? ', ...' : ''} ${one ? 'logs' : 'log'} in without a password: ` +
          (open
            ? "and from every network, so whoever reaches the server's HTTP or native port can read, change and drop what the user may, by naming it. A fresh install's `default` user is such a user until a password is set."
            : 'only from the hosts listed, but anyone or anything on those hosts can log in as the user.'),
        recommendation:
          'Set a password (sha256_password or bcrypt_password) for each, or remove the user if nothing uses it; restrict its hosts to the clients that need it. Users from users.xml are changed in that file; SQL users with ALTER USER.',
        how_to_investigate: INVESTIGATE,
        how_to_fix: named.flatMap((u) => [...passwordFix(u), ...(open ? hostFix(u) : [])]),
        metrics: { users: users.length, open_to_every_network: open ? users.length : 0 },
        as_of: found.ts,
      })
    }
    return findings
  },
}

export const usersOpenToEveryNetwork: Rule<typeof defaults> = {
  id: 'ch_users_any_host',
  engine: 'clickhouse',
  category: 'security',
  summary:
    'ClickHouse users with a password that may connect from every network (HOST ANY, ::/0), with the HOST restriction to set.',
  collectors: ['security'],
  thresholds: defaults,
  async check(ctx) {
    const found = await ctx.clickhouseUsers()
    if (!found || found.status.users === null) return []
    const users = found.status.users.filter((u) => !withoutPassword(u) && openToEveryNetwork(u))
    if (users.length === 0) return []
    const named = users.slice(0, MAX_NAMED)
    const names = named.map((u) => chIdent(u.name))
    const one = users.length === 1
    return [
      {
        severity: 'info',
        object: 'users open to every network',
        objects: named.map((u) => `user ${chIdent(u.name)}`),
        title: `${users.length} ClickHouse user${one ? '' : 's'} may connect from every network: ${listed(names, users.length)}`,
        detail:
          `${names.join(', ')}${users.length > named.length ? ', ...' : ''} may log in from any address (${named
            .map((u) => `${chIdent(u.name)}: ${hostsOf(u)}`)
            .slice(0, 5)
            .join('; ')}): ` +
          "the password is the only barrier, tried from anywhere that reaches the server's ports. Restricting each user to the networks of its clients takes a stolen password's use away elsewhere.",
        recommendation:
          'Restrict each user to the hosts or networks its clients connect from (HOST IP, HOST NAME, or <networks> in users.xml); keep a firewall in front of the ports as well.',
        how_to_investigate: INVESTIGATE,
        how_to_fix: named.flatMap(hostFix),
        metrics: { users: users.length },
        as_of: found.ts,
      },
    ]
  },
}
