// `dbm agent`'s own metrics, exposed at GET /metrics on health.listen_addr beside /healthz (agent.ts):
// each collector's run time and failures per database, the batches sent, buffered, dropped and lost,
// the buffer's batches and bytes, and the time of each POST to the API by its answer. One set per Agent
// (tests run several in one process). The labels name the agent's own databases, from its config file.
import { DURATION_BUCKETS, type CounterChild, type HistogramChild, Registry, registerProcessMetrics } from '../shared/prometheus.ts'

/** A collector's children of one database, resolved once per collector. */
export interface CollectorMetrics {
  duration: HistogramChild
  failures: CounterChild
}

/** What a database's runner records: its collectors' runs. */
export interface RunnerMetrics {
  collector(name: string): CollectorMetrics
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

/** Where the buffer gauges are read at each scrape. */
export interface BufferSource {
  database: string
  batches(): number
  bytes(): number
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
  private readonly apiByStatus = new Map<number, HistogramChild>()

  constructor(buffers: () => Iterable<BufferSource>) {
    registerProcessMetrics(this.registry)
    this.registry.onCollect(() => {
      this.bufferedBatches.reset()
      this.bufferBytes.reset()
      for (const buffer of buffers()) {
        this.bufferedBatches.labels(buffer.database).set(buffer.batches())
        this.bufferBytes.labels(buffer.database).set(buffer.bytes())
      }
    })
  }

  runner(database: string): RunnerMetrics {
    const collectors = new Map<string, CollectorMetrics>()
    return {
      collector: (name) => {
        let found = collectors.get(name)
        if (!found) {
          found = { duration: this.collectorDuration.labels(database, name), failures: this.collectorFailures.labels(database, name) }
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
