// GET /metrics for an organization's API key or a user's session: that organization's own figures,
// computed at scrape time from the store in one query (monitor/evaluations.ts organizationFigures) and written in
// the Prometheus text format by a registry made for the scrape. Nothing in it is server-wide or about
// accounts or mail, so it cannot tell one tenant about another: every value is a function of the
// organization's own databases, their diagnoses and alerts. Database names come from agents' configs
// and API calls (any text); the text module escapes them as label values.
import { Registry } from '../shared/prometheus.ts'
import type { AvailabilityState } from './store/availability/types.ts'
import type { DatabaseFigures } from './store/monitor/evaluations.ts'
import { availabilityView } from './views.ts'

const ENGINES = ['postgres', 'clickhouse'] as const
const STATUSES = ['connected', 'disconnected'] as const
const SEVERITIES = ['critical', 'warning', 'info'] as const

/**
 * The organization's exposition from its databases' figures and the states their agents reported (by
 * database id), judged at `now` (epoch ms): a database its agent reports down is disconnected, as on /health.
 */
export function organizationExposition(
  databases: readonly DatabaseFigures[],
  states: ReadonlyMap<string, AvailabilityState>,
  now: number,
): string {
  const registry = new Registry()
  const counts = registry.gauge({
    name: 'dbm_databases',
    help: "The organization's registered databases by engine and connection status (connected: a batch within max(3 x poll interval, 60 s) and not reported down by its agent).",
    labelNames: ['engine', 'status'],
  })
  const connected = registry.gauge({
    name: 'dbm_database_connected',
    help: "1 while the database's agent sends batches and does not report it down (connected), else 0.",
    labelNames: ['id', 'name', 'engine'],
  })
  // One series per database whatever the cause, so that a cause changing within an outage (timeout, then
  // refused) neither resolves nor opens an alert; the cause is its own info-style series while down.
  const up = registry.gauge({
    name: 'dbm_database_up',
    help: "1 while the database's agent reaches it, 0 while the agent reports it unreachable; absent while the agent is silent or never sent.",
    labelNames: ['id', 'name'],
  })
  const downCause = registry.gauge({
    name: 'dbm_database_down_cause',
    help: 'Always 1, only while the agent reports the database unreachable: the cause label says why (refused, timeout, authentication, ...).',
    labelNames: ['id', 'name', 'cause'],
  })
  const lastBatch = registry.gauge({
    name: 'dbm_database_last_batch_timestamp_seconds',
    help: "When the last batch with data of the database arrived, in seconds since the epoch (absent: never). While it is down the agent sends reports, not batches: this is then the data's age, not the agent's.",
    labelNames: ['id', 'name'],
  })
  const lastHeard = registry.gauge({
    name: 'dbm_database_agent_last_heard_timestamp_seconds',
    help: "When the database's agent was last heard from (a batch or a report that the database is down), in seconds since the epoch (absent: never); time() minus it is the agent's silence.",
    labelNames: ['id', 'name'],
  })
  const score = registry.gauge({
    name: 'dbm_database_health_score',
    help: "The health score (0 to 100) of the database's latest diagnosis (absent: not diagnosed yet).",
    labelNames: ['id', 'name'],
  })
  const findings = registry.gauge({
    name: 'dbm_database_findings',
    help: "Findings of the database's latest diagnosis, by severity (absent: not diagnosed yet).",
    labelNames: ['id', 'name', 'severity'],
  })
  const alerts = registry.gauge({
    name: 'dbm_database_open_alerts',
    help: 'Open alerts of the database, by severity.',
    labelNames: ['id', 'name', 'severity'],
  })
  for (const engine of ENGINES) for (const status of STATUSES) counts.labels(engine, status).set(0)
  for (const db of databases) {
    const state = states.get(db.id)
    const view = availabilityView(db, state, now)
    const status = view.status
    counts.labels(db.engine, status).inc()
    // Up while connected; down (and its cause) while the agent reports it unreachable; absent while the agent is silent.
    if (view.reason === null) up.labels(db.id, db.name).set(1)
    else if (view.reason === 'database_down') {
      up.labels(db.id, db.name).set(0)
      downCause.labels(db.id, db.name, state?.cause ?? 'other').set(1)
    }
    const heard = view.agent_last_heard_at === null ? null : Date.parse(view.agent_last_heard_at)
    if (heard !== null) lastHeard.labels(db.id, db.name).set(heard / 1000)
    connected.labels(db.id, db.name, db.engine).set(status === 'connected' ? 1 : 0)
    if (db.last_seen_at !== null) lastBatch.labels(db.id, db.name).set(db.last_seen_at / 1000)
    if (db.score !== null) score.labels(db.id, db.name).set(db.score)
    for (const severity of SEVERITIES) {
      if (db.findings) findings.labels(db.id, db.name, severity).set(db.findings[severity])
      alerts.labels(db.id, db.name, severity).set(db.open_alerts[severity])
    }
  }
  return registry.expose()
}
