// An organization's alert routes and silences (migration 22), and the two notification writes they
// bring: holding a notification back while a silence lasts, and queueing an open alert's repeat.
// Routes are an ordered list (position), their matchers and destination ids kept as JSON text; a
// destination deleted is taken out of every route in the same transaction (dropDestinationFromRoutes,
// called by alerts/destinations.ts). A silence is never deleted: expiring one early sets its ends_at
// to the time, so it is still listed (?state=expired). Repeats live in alert_notifications as one
// `repeated` row per alert and channel, queued again once the last send is older than the interval:
// the store, not a process's memory, says when an alert was last sent, so repeats hold across restarts
// and several `serve` processes. Reads apart from writes.
import { num, numOrNull, type DbRow } from '../rows.ts'
import type { SqlDriver } from '../driver.ts'
import type { AlertRoute, NotificationChannel, RouteMatch, Silence, SilenceAuthor, SilenceMatchers } from './types.ts'

export type { AlertRoute, RouteMatch, Silence }

/** Which silences a list shows: not yet ended (in effect or to come), ended, or all; newest first. */
export type SilenceState = 'active' | 'expired' | 'all'

export type NewSilence = SilenceMatchers &
  Pick<Silence, 'id' | 'org_id' | 'comment' | 'created_by' | 'created_at' | 'starts_at' | 'ends_at'>

export type NewAlertRoute = Pick<
  AlertRoute,
  'id' | 'org_id' | 'name' | 'match' | 'destinations' | 'continue' | 'repeat_interval_s' | 'created_at'
>

export interface AlertRouteChange {
  name?: string
  match?: RouteMatch
  destinations?: string[]
  continue?: boolean
  repeat_interval_s?: number | null
  /** The route's place in the list, from 0 (beyond the end: last). */
  position?: number
}

export interface AlertRoutingReads {
  /** The organization's silences in that state at `now`, the latest created first, at most `limit`. */
  listSilences(orgId: string, state: SilenceState, now: number, limit: number): Promise<Silence[]>
  getSilence(orgId: string, id: string): Promise<Silence | undefined>
  /** The organization's silences in effect at `now` (started, not ended). */
  silencesInEffect(orgId: string, now: number): Promise<Silence[]>
  /** How many of the organization's silences have not ended at `now`. */
  countActiveSilences(orgId: string, now: number): Promise<number>
  /** The organization's routes in their order. */
  listRoutes(orgId: string): Promise<AlertRoute[]>
  getRoute(orgId: string, id: string): Promise<AlertRoute | undefined>
}

export interface AlertRoutingWrites {
  createSilence(s: NewSilence): Promise<Silence>
  /** Ends a silence of the organization at `now` (one ended already stays as it is); undefined when there is none. */
  expireSilence(orgId: string, id: string, now: number): Promise<Silence | undefined>
  /** Adds a route at the end of the organization's list. */
  createRoute(r: NewAlertRoute): Promise<AlertRoute>
  /** Changes a route of the organization; undefined when there is none. */
  updateRoute(orgId: string, id: string, change: AlertRouteChange, now: number): Promise<AlertRoute | undefined>
  deleteRoute(orgId: string, id: string): Promise<boolean>
  /**
   * Holds a due notification back for a silence until `until` (when it is looked at again); false when
   * it was not due any more (another process took it). Its day of retries starts again at each hold, so
   * a silence longer than a day does not make it given up when it is released.
   */
  holdNotification(id: string, silenceId: string, now: number, until: number): Promise<boolean>
  /**
   * Queues the alert's repeat to `channel` when its last send there (opening or repeat) is at or before
   * `sentBefore` and no repeat is waiting; true when queued.
   */
  queueRepeat(alertId: string, channel: NotificationChannel, sentBefore: number, now: number): Promise<boolean>
}

export interface AlertRoutingStore extends AlertRoutingReads, AlertRoutingWrites {}

function json<T>(text: unknown, fallback: T): T {
  if (typeof text !== 'string') return fallback
  try {
    return JSON.parse(text) as T
  } catch {
    return fallback
  }
}

function toSilence(r: DbRow): Silence {
  const created_by: SilenceAuthor = r.created_by_user
    ? { kind: 'user', id: r.created_by_user }
    : { kind: 'api_key', id: r.created_by_key ?? '' }
  return {
    id: r.id,
    org_id: r.org_id,
    database_id: r.database_id ?? null,
    rule: r.rule ?? null,
    key: r.alert_key ?? null,
    tag: r.tag_key === null || r.tag_key === undefined ? null : { key: r.tag_key, value: r.tag_value ?? '' },
    comment: r.comment,
    created_by,
    created_at: num(r.created_at),
    starts_at: num(r.starts_at),
    ends_at: num(r.ends_at),
    expired_early_at: numOrNull(r.expired_early_at),
  }
}

function toRoute(r: DbRow): AlertRoute {
  const destinations = json<unknown>(r.destinations, [])
  const match = json<unknown>(r.match, {})
  return {
    id: r.id,
    org_id: r.org_id,
    position: num(r.position),
    name: r.name,
    match: match !== null && typeof match === 'object' && !Array.isArray(match) ? (match as RouteMatch) : {},
    destinations: Array.isArray(destinations) ? destinations.filter((d): d is string => typeof d === 'string') : [],
    continue: r.continue_matching === true || Number(r.continue_matching) === 1,
    repeat_interval_s: numOrNull(r.repeat_interval_s),
    created_at: num(r.created_at),
    updated_at: num(r.updated_at),
  }
}

const STATE_SQL: Record<SilenceState, string> = {
  active: 'AND ends_at > $2',
  expired: 'AND ends_at <= $2',
  all: 'AND $2 = $2',
}

/** Takes a deleted destination out of the organization's routes (in the deleting transaction). */
export async function dropDestinationFromRoutes(
  tx: SqlDriver,
  orgId: string,
  destinationId: string,
  now: number,
): Promise<void> {
  for (const r of (await tx.all('SELECT * FROM alert_routes WHERE org_id = $1', [orgId])).map(toRoute)) {
    if (!r.destinations.includes(destinationId)) continue
    await tx.run('UPDATE alert_routes SET destinations = $1, updated_at = $2 WHERE id = $3', [
      JSON.stringify(r.destinations.filter((d) => d !== destinationId)),
      now,
      r.id,
    ])
  }
}

export class SqlAlertRouting implements AlertRoutingStore {
  constructor(private readonly driver: SqlDriver) {}

  async listSilences(orgId: string, state: SilenceState, now: number, limit: number): Promise<Silence[]> {
    const rows = await this.driver.all(
      `SELECT * FROM alert_silences WHERE org_id = $1 ${STATE_SQL[state]} ORDER BY created_at DESC, id DESC LIMIT $3`,
      [orgId, now, limit],
    )
    return rows.map(toSilence)
  }

  async getSilence(orgId: string, id: string): Promise<Silence | undefined> {
    const r = await this.driver.get('SELECT * FROM alert_silences WHERE org_id = $1 AND id = $2', [orgId, id])
    return r ? toSilence(r) : undefined
  }

  async silencesInEffect(orgId: string, now: number): Promise<Silence[]> {
    return (
      await this.driver.all('SELECT * FROM alert_silences WHERE org_id = $1 AND ends_at > $2 AND starts_at <= $2', [
        orgId,
        now,
      ])
    ).map(toSilence)
  }

  async countActiveSilences(orgId: string, now: number): Promise<number> {
    const r = await this.driver.get<{ n: unknown }>(
      'SELECT COUNT(*) AS n FROM alert_silences WHERE org_id = $1 AND ends_at > $2',
      [orgId, now],
    )
    return num(r?.n ?? 0)
  }

  async listRoutes(orgId: string): Promise<AlertRoute[]> {
    return (
      await this.driver.all('SELECT * FROM alert_routes WHERE org_id = $1 ORDER BY position, created_at, id', [orgId])
    ).map(toRoute)
  }

  async getRoute(orgId: string, id: string): Promise<AlertRoute | undefined> {
    const r = await this.driver.get('SELECT * FROM alert_routes WHERE org_id = $1 AND id = $2', [orgId, id])
    return r ? toRoute(r) : undefined
  }

  async createSilence(s: NewSilence): Promise<Silence> {
    await this.driver.run(
      `INSERT INTO alert_silences (id, org_id, database_id, rule, alert_key, tag_key, tag_value, comment, created_by_user, created_by_key, created_at, starts_at, ends_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
      [
        s.id,
        s.org_id,
        s.database_id,
        s.rule,
        s.key,
        s.tag?.key ?? null,
        s.tag?.value ?? null,
        s.comment,
        s.created_by.kind === 'user' ? s.created_by.id : null,
        s.created_by.kind === 'api_key' ? s.created_by.id : null,
        s.created_at,
        s.starts_at,
        s.ends_at,
      ],
    )
    return (await this.getSilence(s.org_id, s.id))!
  }

  async expireSilence(orgId: string, id: string, now: number): Promise<Silence | undefined> {
    await this.driver.run(
      'UPDATE alert_silences SET ends_at = $1, expired_early_at = $1 WHERE org_id = $2 AND id = $3 AND ends_at > $1',
      [now, orgId, id],
    )
    return this.getSilence(orgId, id)
  }

  createRoute(r: NewAlertRoute): Promise<AlertRoute> {
    return this.driver.transaction(async (tx) => {
      const last = await tx.get<{ p: unknown }>('SELECT MAX(position) AS p FROM alert_routes WHERE org_id = $1', [
        r.org_id,
      ])
      const position = last?.p === null || last?.p === undefined ? 0 : num(last.p) + 1
      await tx.run(
        `INSERT INTO alert_routes (id, org_id, position, name, match, destinations, continue_matching, repeat_interval_s, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)`,
        [
          r.id,
          r.org_id,
          position,
          r.name,
          JSON.stringify(r.match),
          JSON.stringify(r.destinations),
          r.continue,
          r.repeat_interval_s,
          r.created_at,
        ],
      )
      return toRoute((await tx.get<DbRow>('SELECT * FROM alert_routes WHERE id = $1', [r.id]))!)
    }, `dbm:alert-routes:${r.org_id}`)
  }

  updateRoute(orgId: string, id: string, change: AlertRouteChange, now: number): Promise<AlertRoute | undefined> {
    return this.driver.transaction(async (tx) => {
      const routes = (
        await tx.all('SELECT * FROM alert_routes WHERE org_id = $1 ORDER BY position, created_at, id', [orgId])
      ).map(toRoute)
      const at = routes.findIndex((r) => r.id === id)
      if (at < 0) return undefined
      const current = routes[at]!
      await tx.run(
        'UPDATE alert_routes SET name = $1, match = $2, destinations = $3, continue_matching = $4, repeat_interval_s = $5, updated_at = $6 WHERE id = $7',
        [
          change.name ?? current.name,
          JSON.stringify(change.match ?? current.match),
          JSON.stringify(change.destinations ?? current.destinations),
          change.continue ?? current.continue,
          change.repeat_interval_s !== undefined ? change.repeat_interval_s : current.repeat_interval_s,
          now,
          id,
        ],
      )
      if (change.position !== undefined) {
        const order = routes.filter((r) => r.id !== id)
        order.splice(Math.min(change.position, order.length), 0, current)
        for (const [i, r] of order.entries())
          if (r.position !== i) await tx.run('UPDATE alert_routes SET position = $1 WHERE id = $2', [i, r.id])
      }
      return toRoute((await tx.get<DbRow>('SELECT * FROM alert_routes WHERE id = $1', [id]))!)
    }, `dbm:alert-routes:${orgId}`)
  }

  async deleteRoute(orgId: string, id: string): Promise<boolean> {
    return (await this.driver.run('DELETE FROM alert_routes WHERE org_id = $1 AND id = $2', [orgId, id])) > 0
  }

  async holdNotification(id: string, silenceId: string, now: number, until: number): Promise<boolean> {
    const held = await this.driver.run(
      // created_at moves along: the day of retries a notification gets (giveUpNotificationsBefore) counts from its release.
      'UPDATE alert_notifications SET silenced_by = $1, next_attempt_at = $2, created_at = $4 WHERE id = $3 AND sent_at IS NULL AND gave_up_at IS NULL AND next_attempt_at <= $4',
      [silenceId, until, id, now],
    )
    return held > 0
  }

  queueRepeat(alertId: string, channel: NotificationChannel, sentBefore: number, now: number): Promise<boolean> {
    return this.driver.transaction(async (tx) => {
      const rows = await tx.all<{ event: string; sent_at: unknown; gave_up_at: unknown }>(
        `SELECT event, sent_at, gave_up_at FROM alert_notifications WHERE alert_id = $1 AND channel = $2 AND event IN ('opened', 'repeated')`,
        [alertId, channel],
      )
      if (rows.some((r) => r.sent_at === null && r.gave_up_at === null)) return false // one is waiting
      const sent = rows.map((r) => numOrNull(r.sent_at)).filter((t): t is number => t !== null)
      if (sent.length === 0 || Math.max(...sent) > sentBefore) return false
      if (rows.some((r) => r.event === 'repeated')) {
        await tx.run(
          `UPDATE alert_notifications SET created_at = $1, next_attempt_at = $1, attempts = 0, sent_at = NULL, gave_up_at = NULL, last_error = NULL, silenced_by = NULL
           WHERE alert_id = $2 AND channel = $3 AND event = 'repeated'`,
          [now, alertId, channel],
        )
      } else {
        await tx.run(
          `INSERT INTO alert_notifications (id, alert_id, event, channel, created_at, next_attempt_at, attempts) VALUES ($1, $2, 'repeated', $3, $4, $4, 0)`,
          [Bun.randomUUIDv7(), alertId, channel, now],
        )
      }
      return true
    }, `dbm:alert-repeat:${alertId}`)
  }
}
