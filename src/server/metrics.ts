// `dbm serve`'s own metrics, one set per process as Prometheus client libraries keep them, exposed at
// GET /metrics (routes/metrics.ts) only to the operator's DBM_METRICS_TOKEN: they are the server's as a
// whole, so an organization would see other tenants' activity in them, and the mail counters move when a
// reset mail goes to an address that has an account. No label names an organization or a database
// (series per tenant would grow without bound); organizations read their own figures instead
// (organization-metrics.ts).
import { DURATION_BUCKETS, type HistogramChild, Registry, registerProcessMetrics } from '../shared/prometheus.ts'
import type { SqlDriver } from './store/driver.ts'

export const serverRegistry = new Registry()
registerProcessMetrics(serverRegistry)

export const serverMetrics = {
  ingestRequests: serverRegistry.counter({
    name: 'dbm_ingest_requests_total',
    help: 'POST /api/v1/ingest requests answered, by HTTP status.',
    labelNames: ['status'],
  }),
  ingestDuration: serverRegistry.histogram({
    name: 'dbm_ingest_request_duration_seconds',
    help: 'Time to answer POST /api/v1/ingest, from the request to the response, in seconds.',
    buckets: DURATION_BUCKETS,
  }),
  ingestBatches: serverRegistry.counter({
    name: 'dbm_ingest_batches_total',
    help: 'Agent batches accepted: applied, or duplicate (a batch_id applied before, acknowledged and ignored).',
    labelNames: ['result'],
  }),
  ingestRows: serverRegistry.counter({
    name: 'dbm_ingest_rows_total',
    help: 'Rows in the applied batches: statements, tables, indexes, activity, locks and the other lists, one per entry.',
  }),
  ingestShed: serverRegistry.counter({
    name: 'dbm_ingest_shed_total',
    help: 'POST /api/v1/ingest requests refused with 503 and Retry-After before their body was read, because the process (or the organization, its share of them) had as many ingests in flight as it takes; by kind (backlog: sent from an agent buffer, current).',
    labelNames: ['kind'],
  }),
  ingestRefusals: serverRegistry.counter({
    name: 'dbm_ingest_refusals_total',
    help: 'POST /api/v1/ingest requests refused before their batch was applied, by reason: unauthenticated (401) and forbidden (403: no ingest scope), refused before taking a place; capacity (the process full) and org_share (the organization holds its share of the places), both 503 (dbm_ingest_shed_total by kind); body_timeout (408: the body did not arrive in time); body_aborted (the client closed the connection before its body arrived).',
    labelNames: ['reason'],
  }),
  ingestInFlight: serverRegistry.gauge({
    name: 'dbm_ingest_in_flight',
    help: 'POST /api/v1/ingest requests admitted and not yet answered.',
  }),
  storeQueryDuration: serverRegistry.histogram({
    name: 'dbm_store_query_duration_seconds',
    help: "Time of the store driver's calls, by call (all, get, run, run_all, exec), in seconds.",
    labelNames: ['call'],
    buckets: DURATION_BUCKETS,
  }),
  healthMonitorRunDuration: serverRegistry.histogram({
    name: 'dbm_health_monitor_run_duration_seconds',
    help: 'Time of one health monitor pass (diagnoses and notification deliveries), in seconds.',
    buckets: DURATION_BUCKETS,
  }),
  healthMonitorDiagnoses: serverRegistry.counter({
    name: 'dbm_health_monitor_diagnoses_total',
    help: 'Databases diagnosed by the health monitor, by outcome (ok, failed).',
    labelNames: ['outcome'],
  }),
  retentionDeletedRows: serverRegistry.counter({
    name: 'dbm_retention_deleted_rows_total',
    help: 'Rows deleted by retention: telemetry past its retention, and remembered batch ids.',
    labelNames: ['kind'],
  }),
  websocketClients: serverRegistry.gauge({
    name: 'dbm_websocket_clients',
    help: 'Open WebSocket streams (active queries).',
  }),
  responseSchemaErrors: serverRegistry.counter({
    name: 'dbm_response_schema_errors_total',
    help: 'Answers that did not match their route response schema (answered 500 and logged): a bug to report.',
  }),
  rateLimitRefusals: serverRegistry.counter({
    name: 'dbm_rate_limit_refusals_total',
    help: 'Requests refused with 429 Too Many Requests.',
  }),
  mailDeliveries: serverRegistry.counter({
    name: 'dbm_mail_deliveries_total',
    help: 'Mails by outcome: sent (SMTP accepted it), failed, or logged (no SMTP configured).',
    labelNames: ['outcome'],
  }),
  alertDestinationDeliveries: serverRegistry.counter({
    name: 'dbm_alert_destination_deliveries_total',
    help: 'Alert destination deliveries by kind and outcome: delivered (2xx answer, or a mail queued) or failed (retried).',
    labelNames: ['kind', 'outcome'],
  }),
  webhookDeliveries: serverRegistry.counter({
    name: 'dbm_webhook_deliveries_total',
    help: 'Webhook POSTs by outcome: delivered (2xx answer) or failed.',
    labelNames: ['outcome'],
  }),
}

/** Children of the fixed label values, resolved once so the hot paths only add numbers. */
const storeCalls = {
  all: serverMetrics.storeQueryDuration.labels('all'),
  get: serverMetrics.storeQueryDuration.labels('get'),
  run: serverMetrics.storeQueryDuration.labels('run'),
  runAll: serverMetrics.storeQueryDuration.labels('run_all'),
  exec: serverMetrics.storeQueryDuration.labels('exec'),
}
export const ingestBatchResults = {
  applied: serverMetrics.ingestBatches.labels('applied'),
  duplicate: serverMetrics.ingestBatches.labels('duplicate'),
}
const ingestStatusChildren = new Map<number, ReturnType<typeof serverMetrics.ingestRequests.labels>>()
/** Counts one ingest request answered with `status`, and its time. */
export function observeIngest(status: number, startMs: number): void {
  let child = ingestStatusChildren.get(status)
  if (!child) ingestStatusChildren.set(status, (child = serverMetrics.ingestRequests.labels(String(status))))
  child.inc()
  serverMetrics.ingestDuration.labels().since(startMs)
}

const timed = new WeakSet<object>()

async function time<T>(child: HistogramChild, call: Promise<T>): Promise<T> {
  const started = performance.now()
  try {
    return await call
  } finally {
    child.since(started)
  }
}

/**
 * Times the driver's calls into dbm_store_query_duration_seconds, its transactions' drivers included.
 * Replaces the methods on the object itself, so the driver keeps its class and fields.
 */
export function timeStoreDriver<D extends SqlDriver>(driver: D): D {
  if (timed.has(driver)) return driver
  timed.add(driver)
  const { all, get, run, runAll, exec, transaction } = driver
  const runLast = driver.runLast
  driver.all = (sql, params) => time(storeCalls.all, all.call(driver, sql, params)) as never
  driver.get = (sql, params) => time(storeCalls.get, get.call(driver, sql, params)) as never
  driver.run = (sql, params) => time(storeCalls.run, run.call(driver, sql, params))
  driver.runAll = (statements) => time(storeCalls.runAll, runAll.call(driver, statements))
  driver.exec = (script) => time(storeCalls.exec, exec.call(driver, script))
  if (runLast) driver.runLast = (statements) => time(storeCalls.runAll, runLast.call(driver, statements))
  driver.transaction = <T>(fn: (tx: SqlDriver) => Promise<T>, lockKey?: string) =>
    transaction.call(driver, (tx) => fn(timeStoreDriver(tx)), lockKey) as Promise<T>
  return driver
}
