// `dbm agent`'s own metrics, exposed at GET /metrics on health.listen_addr beside /healthz (agent.ts):
// each collector's run time and failures per database, the batches sent, buffered, dropped and lost,
// the buffer's batches and bytes, whether each database is connected, the time of each POST to the API
// by its answer, and for databases with enabled_exporter the database's own figures (exporter.ts). One set per Agent
// (tests run several in one process). The labels name the agent's own databases, from its config file.
import type { EngineName } from '../shared/collectors.ts'
import {
  DURATION_BUCKETS,
  type CounterChild,
  type HistogramChild,
  Registry,
  registerProcessMetrics,
} from '../shared/prometheus.ts'
import type { IngestBatch } from '../shared/wire.ts'
import { Exporter } from './exporter.ts'

/** A collector's children of one database, resolved once per collector. */
export interface CollectorMetrics {
  duration: HistogramChild
  failures: CounterChild
}

/** What a database's runner records: its collectors' runs, and with enabled_exporter each cycle's figures. */
export interface RunnerMetrics {
  collector(name: string): CollectorMetrics
  exported?: (batch: IngestBatch) => void
}

/** What a database's shipper records: its batches and its requests to the API. */
export interface ShipperMetrics {
  sent: CounterChild
  buffered: CounterChild
  dropped: CounterChild
  lost: CounterChild
  /** Times a POST to the API; `status` is the HTTP status, or 0 when no answer came. */
  request(status: number, startMs: number): void
}

/** Where the gauges of a database are read at each scrape. */
export interface DatabaseSource {
  database: string
  batches(): number
  bytes(): number
  /** Whether the database is connected (its runner's state); absent: not reported. */
  connected?(): boolean
}

export class AgentMetrics {
  readonly registry = new Registry()
  private readonly collectorDuration = this.registry.histogram({
    name: 'dbm_agent_collector_duration_seconds',
    help: "Time of a collector's run, failed runs included, in seconds.",
    labelNames: ['database', 'collector'],
    buckets: DURATION_BUCKETS,
  })
  private readonly collectorFailures = this.registry.counter({
    name: 'dbm_agent_collector_failures_total',
    help: 'Collector runs that failed (an error, or past the collector deadline).',
    labelNames: ['database', 'collector'],
  })
  private readonly batchesSent = this.registry.counter({
    name: 'dbm_agent_batches_sent_total',
    help: 'Batches the API accepted (a 2xx answer), sent directly or from the buffer.',
    labelNames: ['database'],
  })
  private readonly batchesBuffered = this.registry.counter({
    name: 'dbm_agent_batches_buffered_total',
    help: 'Batches written to the disk buffer (the API did not take them, or earlier ones wait).',
    labelNames: ['database'],
  })
  private readonly batchesDropped = this.registry.counter({
    name: 'dbm_agent_batches_dropped_total',
    help: 'Batches the API refused as malformed (400, 413, 422), not sent again.',
    labelNames: ['database'],
  })
  private readonly batchesLost = this.registry.counter({
    name: 'dbm_agent_batches_lost_total',
    help: 'Batches neither delivered nor kept: the buffer failed, buffer.max_bytes made room, or they outlived the buffer lifetime.',
    labelNames: ['database'],
  })
  private readonly bufferedBatches = this.registry.gauge({
    name: 'dbm_agent_buffered_batches',
    help: 'Batches waiting in the disk buffer.',
    labelNames: ['database'],
  })
  private readonly bufferBytes = this.registry.gauge({
    name: 'dbm_agent_buffer_bytes',
    help: 'Bytes of the batches waiting in the disk buffer.',
    labelNames: ['database'],
  })
  private readonly apiDuration = this.registry.histogram({
    name: 'dbm_agent_api_request_duration_seconds',
    help: 'Time of a POST of a batch to the API, by HTTP status (0: no answer), in seconds.',
    labelNames: ['status'],
    buckets: DURATION_BUCKETS,
  })
  private readonly databaseUp = this.registry.gauge({
    name: 'dbm_agent_database_up',
    help: 'Whether the agent is connected to the database (1) or not (0).',
    labelNames: ['database'],
  })
  private readonly apiByStatus = new Map<number, HistogramChild>()
  private readonly exporter = new Exporter(this.registry)

  constructor(databases: () => Iterable<DatabaseSource>) {
    registerProcessMetrics(this.registry)
    this.registry.onCollect(() => {
      this.bufferedBatches.reset()
      this.bufferBytes.reset()
      this.databaseUp.reset()
      for (const source of databases()) {
        this.bufferedBatches.labels(source.database).set(source.batches())
        this.bufferBytes.labels(source.database).set(source.bytes())
        if (source.connected) this.databaseUp.labels(source.database).set(source.connected() ? 1 : 0)
      }
    })
  }

  /** The runner's series of `database`; `exporter`: its engine, when enabled_exporter is on. */
  runner(database: string, exporter?: EngineName): RunnerMetrics {
    const collectors = new Map<string, CollectorMetrics>()
    return {
      exported: exporter ? this.exporter.recorder(database, exporter) : undefined,
      collector: (name) => {
        let found = collectors.get(name)
        if (!found) {
          found = {
            duration: this.collectorDuration.labels(database, name),
            failures: this.collectorFailures.labels(database, name),
          }
          collectors.set(name, found)
        }
        return found
      },
    }
  }

  shipper(database: string): ShipperMetrics {
    return {
      sent: this.batchesSent.labels(database),
      buffered: this.batchesBuffered.labels(database),
      dropped: this.batchesDropped.labels(database),
      lost: this.batchesLost.labels(database),
      request: (status, startMs) => {
        let child = this.apiByStatus.get(status)
        if (!child) this.apiByStatus.set(status, (child = this.apiDuration.labels(String(status))))
        child.since(startMs)
      },
    }
  }
}
