// Which destinations an alert goes to, how often it is sent again, and whether a silence holds it back:
// pure functions over an organization's routes and silences (store/alerts/routing.ts), used by the
// monitor (monitor/diagnosis.ts, notifications.ts) when it queues, repeats and delivers notifications,
// and by the alerts route to mark a silenced alert. With no routes, every enabled destination gets every alert (as before routes were).
// With routes, an alert goes to the destinations of the first route whose matchers all match it, then
// of each later one while the matched route says `continue`; an alert no route matches goes to no
// destination. The users' mail and the organization's webhook are not destinations: routes leave them be.
import type {
  AlertRoute,
  AlertSeverity,
  RouteMatch,
  Silence,
  SilenceAuthor,
  SilenceMatchers,
} from '../store/alerts/types.ts'

// The routes' and silences' records are the store's (store/alerts/types.ts); named here too for the callers.
export type { AlertRoute, RouteMatch, Silence, SilenceAuthor, SilenceMatchers }

/** What routing and silences look at of an alert. */
export interface RoutableAlert {
  key: string
  rule: string
  severity: AlertSeverity
  consequences?: { key: string }[]
}

/** What routing and silences look at of its database. */
export interface RoutableDatabase {
  id: string
  tags: Record<string, string>
}

export function routeMatches(match: RouteMatch, alert: RoutableAlert, db: RoutableDatabase): boolean {
  if (match.severity && !match.severity.includes(alert.severity)) return false
  if (match.rule && !match.rule.includes(alert.rule)) return false
  if (match.database_id && !match.database_id.includes(db.id)) return false
  if (match.tag)
    for (const [k, v] of Object.entries(match.tag)) if (!Object.hasOwn(db.tags, k) || db.tags[k] !== v) return false
  return true
}

/**
 * The destinations an alert goes to, each with its repeat interval in milliseconds (null: none; the
 * shortest when several matched routes name it). Only destinations in `enabled` (ids, in their order).
 */
export function destinationsFor(
  routes: AlertRoute[],
  enabled: string[],
  alert: RoutableAlert,
  db: RoutableDatabase,
): Map<string, number | null> {
  const plan = new Map<string, number | null>()
  if (routes.length === 0) {
    for (const id of enabled) plan.set(id, null)
    return plan
  }
  const on = new Set(enabled)
  for (const route of [...routes].sort((a, b) => a.position - b.position)) {
    if (!routeMatches(route.match, alert, db)) continue
    const repeat = route.repeat_interval_s === null ? null : route.repeat_interval_s * 1000
    for (const id of route.destinations) {
      if (!on.has(id)) continue
      const before = plan.get(id)
      plan.set(
        id,
        before === undefined ? repeat : before === null ? repeat : repeat === null ? before : Math.min(before, repeat),
      )
    }
    if (!route.continue) break
  }
  return plan
}

export function silenceMatches(s: SilenceMatchers, alert: RoutableAlert, db: RoutableDatabase): boolean {
  if (s.database_id === null && s.rule === null && s.key === null && s.tag === null) return false
  if (s.database_id !== null && s.database_id !== db.id) return false
  if (s.rule !== null && s.rule !== alert.rule) return false
  if (s.key !== null && s.key !== alert.key && s.key !== alert.consequences?.[0]?.key) return false
  if (s.tag !== null && (!Object.hasOwn(db.tags, s.tag.key) || db.tags[s.tag.key] !== s.tag.value)) return false
  return true
}

/** Whether a silence is in effect at `now`: started, and not ended. */
export const silenceInEffect = (s: Pick<Silence, 'starts_at' | 'ends_at'>, now: number) =>
  s.starts_at <= now && now < s.ends_at

/** The silence in effect that holds the alert back, the one that ends last; undefined when none does. */
export function silenceOf<S extends Silence>(
  silences: S[],
  alert: RoutableAlert,
  db: RoutableDatabase,
  now: number,
): S | undefined {
  let found: S | undefined
  for (const s of silences) {
    if (!silenceInEffect(s, now) || !silenceMatches(s, alert, db)) continue
    if (!found || s.ends_at > found.ends_at) found = s
  }
  return found
}
