// GET /metrics for an organization's API key or a user's session: that organization's own figures,
// computed at scrape time from the store in one query (sql-health.ts organizationFigures) and written in
// the Prometheus text format by a registry made for the scrape. Nothing in it is server-wide or about
// accounts or mail, so it cannot tell one tenant about another: every value is a function of the
// organization's own databases, their diagnoses and alerts. Database names come from agents' configs
// and API calls (any text); the text module escapes them as label values.
import { Registry } from '../shared/prometheus.ts'
import type { AvailabilityState } from './store/sql-availability.ts'
import type { DatabaseFigures } from './store/sql-health.ts'
import { availabilityView } from './views.ts'

const ENGINES = ['postgres', 'clickhouse'] as const
const STATUSES = ['connected', 'disconnected'] as const
const SEVERITIES = ['critical', 'warning', 'info'] as const

/**
 * The organization's exposition from its databases' figures and the states their agents reported (by
 * database id), judged at `now` (epoch ms): a database its agent reports down is disconnected, as on /health.
 */
export function organizationExposition(databases: readonly DatabaseFigures[], states: ReadonlyMap<string, AvailabilityState>, now: number): string {
  const registry = new Registry()
  const counts = registry.gauge({
    name: 'dbm_databases',
    help: "The organization's registered databases by engine and connection status (connected: a batch within max(3 x poll interval, 60 s) and not reported down by its agent).",
    labelNames: ['engine', 'status'],
  })
  const connected = registry.gauge({
    name: 'dbm_database_connected',
    help: '1 while the database\'s agent sends batches and does not report it down (connected), else 0.',
    labelNames: ['id', 'name', 'engine'],
  })
  const up = registry.gauge({
    name: 'dbm_database_up',
    help: "1 while the database is connected, 0 while its agent reports it unreachable (cause: refused, timeout, authentication, ...); absent while the agent is silent.",
    labelNames: ['id', 'name', 'cause'],
  })
  const lastBatch = registry.gauge({
    name: 'dbm_database_last_batch_timestamp_seconds',
    help: 'When the last batch of the database arrived, in seconds since the epoch (absent: never); time() minus it is its age.',
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
    // Up while connected; down with its cause while the agent reports it unreachable; absent while the agent is silent.
    if (view.reason === null) up.labels(db.id, db.name, '').set(1)
    else if (view.reason === 'database_down') up.labels(db.id, db.name, state?.cause ?? 'other').set(0)
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
