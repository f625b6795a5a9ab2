// security (ClickHouse): the users the security advisors judge, read from system.users every few minutes
// (they change rarely): each one's authentication (auth_type: no_password, plaintext_password, ...) and
// the hosts it may connect from (host_ip, host_names, host_names_regexp, host_names_like), with where
// it is defined (users.xml or SQL). Reading system.users needs SHOW USERS, which the documented
// monitoring user (SELECT ON system.*) lacks: then users is null with an info note naming the grant,
// never an error. Names are the server's text and travel as they are (the doctor quotes them).
import { ClickHouseError } from '@clickhouse/client'
import { ingestMaxItems } from '../../../shared/ingest-limits.ts'
import { chIdent } from '../../../shared/sql-text.ts'
import type { ClickHouseUser, ClickHouseUsers } from '../../../shared/wire.ts'
import { registerCollector } from '../registry.ts'
import type { ClickHouseContext } from '../types.ts'
import { select } from './common.ts'

/** How often system.users is read again (the first cycle after a start always reads it). */
export const SECURITY_INTERVAL_MS = 5 * 60_000

/** What --check and the health status say when system.users is not readable (no `;`: --check separates notes with it). */
export function usersNote(user: string): string {
  return `security: user ${chIdent(user)} cannot read system.users, so users without a password or open to every network are not checked (GRANT SHOW USERS ON *.* TO ${chIdent(user)})`
}

/** The note when system.users is not readable, else undefined. */
export async function usersVisibilityNote(
  ctx: Pick<ClickHouseContext, 'client' | 'versionNum'>,
): Promise<string | undefined> {
  if ((await readUsers(ctx)) !== null) return undefined
  const [who] = await select<{ user: string }>(ctx as ClickHouseContext, 'SELECT currentUser() AS user')
  return usersNote(who?.user ?? 'dbm_monitor')
}

// auth_type is an array from 24.9 (several methods per user), a single enum before: both read as an
// array of strings. Lists are cut to what the wire carries.
const USERS_SQL = `
  SELECT name, storage, arrayMap(a -> toString(a), auth_type) AS auth_type,
         arraySlice(host_ip, 1, 32) AS host_ip, arraySlice(host_names, 1, 32) AS host_names,
         arraySlice(host_names_regexp, 1, 32) AS host_names_regexp, arraySlice(host_names_like, 1, 32) AS host_names_like
  FROM system.users ORDER BY name LIMIT {limit:UInt32}`

/** Before 24.9 auth_type is one enum value. */
const USERS_SQL_SINGLE = USERS_SQL.replace('arrayMap(a -> toString(a), auth_type)', '[toString(auth_type)]')

/** The engine refused the read for want of a grant. */
const isAccessDenied = (e: unknown) => e instanceof ClickHouseError && (e.type === 'ACCESS_DENIED' || e.code === '497')

const cut = (list: unknown, max: number) =>
  Array.isArray(list) ? list.slice(0, 32).map((v) => String(v).slice(0, max)) : []

/** system.users, or null when the user may not read it. */
export async function readUsers(
  ctx: Pick<ClickHouseContext, 'client' | 'versionNum'>,
): Promise<ClickHouseUser[] | null> {
  const params = { limit: ingestMaxItems.clickhouse_users }
  // The form of the server's version first; the other one if the engine refuses it (a build between the two).
  const [first, second] = ctx.versionNum >= 24009 ? [USERS_SQL, USERS_SQL_SINGLE] : [USERS_SQL_SINGLE, USERS_SQL]
  let rows: Record<string, unknown>[]
  try {
    rows = await select<Record<string, unknown>>(ctx as ClickHouseContext, first, params).catch((e) => {
      if (isAccessDenied(e)) throw e
      return select<Record<string, unknown>>(ctx as ClickHouseContext, second, params)
    })
  } catch (e) {
    if (isAccessDenied(e)) return null
    throw e
  }
  return rows.map((r) => ({
    name: String(r.name),
    storage: String(r.storage ?? '').slice(0, 200),
    auth_type: cut(r.auth_type, 64).slice(0, 16),
    host_ip: cut(r.host_ip, 256),
    host_names: cut(r.host_names, 256),
    host_names_regexp: cut(r.host_names_regexp, 256),
    host_names_like: cut(r.host_names_like, 256),
  }))
}

export const clickhouseSecurity = registerCollector<ClickHouseContext>({
  name: 'security',
  engine: 'clickhouse',
  defaultEnabled: true,
  async checkNotes({ client, versionNum }) {
    const note = await usersVisibilityNote({ client, versionNum })
    return note ? [note] : []
  },
  async collect(ctx) {
    const last = ctx.state.get('read_at')
    if (typeof last === 'number' && ctx.now - last < SECURITY_INTERVAL_MS && ctx.now >= last) return {}
    const users = await readUsers(ctx)
    if (users === null) {
      const [who] = await select<{ user: string }>(ctx, 'SELECT currentUser() AS user')
      ctx.infos?.set('security', usersNote(who?.user ?? 'dbm_monitor'))
    } else ctx.infos?.delete('security')
    ctx.state.set('read_at', ctx.now)
    const section: ClickHouseUsers = { users }
    return { clickhouse_users: section }
  },
})
