// What the monitor does with one database's diagnosis: recommendations (verified organizations: one
// per finding key, updated while the finding stays, resolved when it goes, with the finding's fix
// commands as remediation_sql), and alerts, one per cause with a critical finding (doctor/grouping.ts),
// opened when the cause appears, kept with its findings while it stays and resolved when it goes; each
// state change queues a notification per channel (the users' mail, the webhook, and the destinations
// the organization's routes choose, alerts/routing.ts), and an alert still open is queued again for a
// route that repeats. Leases and the order of databases are schedule.ts's; delivery is notifications.ts's.
import type { Deps } from '../context.ts'
import type { Diagnosis } from '../doctor/index.ts'
import { currentDiagnosis } from '../doctor/current.ts'
import type { FindingGroup } from '../doctor/grouping.ts'
import type { Finding } from '../doctor/types.ts'
import type { RegisteredDatabase } from '../store/types.ts'
import type {
  AlertInput,
  DiagnosisSummary,
  FindingRecord,
  MonitoredDatabase,
  NotificationChannel,
} from '../store/monitor/evaluations.ts'
import { destinationChannel } from '../store/alerts/destinations.ts'
import { type RoutableDatabase, destinationsFor, silenceOf } from '../alerts/routing.ts'
import { NOTIFICATIONS_PER_RUN, type OrgRouting, orgRouting } from './notifications.ts'

/** What applying the diagnoses of one pass opened and resolved. */
export interface AppliedChanges {
  recommendations: { opened: number; resolved: number }
  alerts: { opened: number; resolved: number }
}

/** What one pass looks up once per organization: its notification channels and its routing. */
export interface PassLookups {
  channelsByOrg: Map<string, NotificationChannel[]>
  routingByOrg: Map<string, OrgRouting>
}

export const newPassLookups = (): PassLookups => ({ channelsByOrg: new Map(), routingByOrg: new Map() })

function toRecord(f: Finding): FindingRecord {
  return {
    key: f.key,
    rule: f.rule,
    severity: f.severity,
    category: f.category,
    title: f.title,
    detail: f.detail,
    recommendation: f.recommendation,
    remediation_sql: f.how_to_fix.join('\n'),
    cause: f.cause,
  }
}

/** The alert of a cause with a critical finding: the lead's title and detail, and every finding of the cause. */
function causeAlert(g: FindingGroup, byKey: Map<string, Finding>): AlertInput {
  const lead = byKey.get(g.lead)!
  return {
    key: g.key,
    rule: lead.rule,
    severity: g.severity,
    title: g.title,
    detail: lead.detail,
    consequences: g.findings
      .map((k) => byKey.get(k)!)
      .map((f) => ({ key: f.key, rule: f.rule, severity: f.severity, title: f.title })),
  }
}

/** The part of a diagnosis database_health keeps (status, score, findings by severity, active queries). */
export function diagnosisSummary(diagnosis: Diagnosis): DiagnosisSummary {
  const counts = diagnosis.metrics_summary.findings
  const active = diagnosis.metrics_summary.active_queries
  return {
    status: diagnosis.status,
    score: diagnosis.score,
    findings: counts,
    active_queries: typeof active === 'number' ? active : null,
  }
}

export function createDiagnosisApplier(deps: Deps) {
  const { store, log } = deps
  const health = store.monitor

  /**
   * Queues a repeat of each open, unsilenced alert of the database to each destination its routes repeat
   * to, when the interval has passed since its last send there (the store decides: alerts/routing.ts).
   */
  async function queueRepeats(databaseId: string, routing: OrgRouting, target: RoutableDatabase, now: number) {
    for (const a of await health.listAlerts(databaseId, 'open', NOTIFICATIONS_PER_RUN)) {
      if (silenceOf(routing.silences, a, target, now)) continue
      for (const [id, repeatMs] of destinationsFor(routing.routes, routing.enabled, a, target)) {
        if (repeatMs === null) continue
        if (await store.alertRouting.queueRepeat(a.id, destinationChannel(id), now - repeatMs, now))
          log.info('alert repeat queued', { database: databaseId, alert: a.key, destination: id })
      }
    }
  }

  /** Applies the database's diagnosis at `now` to its recommendations and alerts, adding what changed to `changes`. */
  async function apply(
    monitored: MonitoredDatabase,
    db: RegisteredDatabase,
    diagnosis: Diagnosis,
    now: number,
    changes: AppliedChanges,
    lookups: PassLookups,
  ) {
    if (monitored.org_verified) {
      const r = await health.syncRecommendations(db.id, diagnosis.findings.map(toRecord), diagnosis.failed_rules, now)
      changes.recommendations.opened += r.opened
      changes.recommendations.resolved += r.resolved
    }
    let channels = lookups.channelsByOrg.get(db.org_id)
    if (!channels) {
      // Mail goes to users who verified their address, so only verified organizations have any.
      channels = [
        ...(monitored.org_verified ? ['email' as const] : []),
        ...((await health.getWebhook(db.org_id)) ? ['webhook' as const] : []),
      ]
      lookups.channelsByOrg.set(db.org_id, channels)
    }
    let routing = lookups.routingByOrg.get(db.org_id)
    if (!routing) lookups.routingByOrg.set(db.org_id, (routing = await orgRouting(store, db.org_id, now)))
    const target: RoutableDatabase = { id: db.id, tags: db.tags }
    // The users' mail and the webhook, and the destinations the organization's routes choose for the cause.
    const channelsFor = (cause: AlertInput): NotificationChannel[] => [
      ...channels,
      ...[...destinationsFor(routing.routes, routing.enabled, cause, target).keys()].map(destinationChannel),
    ]
    const byKey = new Map(diagnosis.findings.map((f) => [f.key, f]))
    const critical = diagnosis.groups.filter((g) => g.severity === 'critical').map((g) => causeAlert(g, byKey))
    const synced = await health.syncAlerts(db.id, critical, diagnosis.failed_rules, channelsFor, now)
    if (routing.routes.some((r) => r.repeat_interval_s !== null)) await queueRepeats(db.id, routing, target, now)
    for (const key of synced.opened) log.info('alert opened', { database: db.id, alert: key })
    for (const key of synced.resolved) log.info('alert resolved', { database: db.id, alert: key })
    changes.alerts.opened += synced.opened.length
    changes.alerts.resolved += synced.resolved.length
  }

  /**
   * Diagnoses a database leased to this monitor and applies the diagnosis; its summary for database_health,
   * or undefined when the database was deleted meanwhile. Each pass diagnoses anew and records the result
   * as the database's latest (doctor/current.ts): the list and the pages then show what the alerts saw.
   */
  async function evaluate(
    monitored: MonitoredDatabase,
    now: number,
    changes: AppliedChanges & { databases: number },
    lookups: PassLookups,
  ): Promise<DiagnosisSummary | undefined> {
    const db = await store.getDatabase(monitored.org_id, monitored.id)
    if (!db) return undefined
    changes.databases++
    const diagnosis = await currentDiagnosis(deps, db, now, { maxAgeMs: 0, by: 'monitor' })
    await apply(monitored, db, diagnosis, now, changes, lookups)
    return diagnosisSummary(diagnosis)
  }

  return { evaluate }
}
