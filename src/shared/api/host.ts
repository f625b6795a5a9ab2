// The answer of GET /api/v1/databases/{id}/host (src/server/routes/host.ts): the host's latest CPU,
// load, memory and filesystems with each filesystem's free-space series and fill forecast, the host
// series over the window, and the database's size trend (what dbm can tell when no agent is beside
// the database).
import { t } from 'elysia'
import { Nullable, Timestamp } from './common.ts'

const bytes = (description: string) => t.Number({ description: `bytes; ${description}` })

export const Trend = t.Object(
  {
    rate_bytes_per_s: t.Number({ description: 'least-squares rate of change over the basis (negative: shrinking)' }),
    samples: t.Integer({ description: 'minute samples fitted' }),
    since: Timestamp(),
    until: Timestamp(),
    basis_seconds: t.Integer({
      description: 'the span fitted: the last day, or less when dbm has less (at least 10 minutes)',
    }),
  },
  { title: 'Trend' },
)

export const HostFilesystemView = t.Object(
  {
    roles: t.Array(t.String(), {
      description: 'what the database keeps there: data, wal, log, tablespace:<name>, disk:<name>',
    }),
    path: t.String(),
    mount: Nullable(t.String()),
    device: Nullable(t.String()),
    total_bytes: bytes('size'),
    available_bytes: bytes('free to the database (statfs f_bavail)'),
    inodes_total: Nullable(t.Number()),
    inodes_available: Nullable(t.Number()),
    forecast: t.Object(
      {
        trend: Nullable(Trend),
        fills_at: Nullable(Timestamp()),
      },
      {
        description:
          'available bytes over the last day: trend null with under 10 minutes of samples; fills_at null unless free space shrinks',
      },
    ),
    series: t.Array(
      t.Object({ ts: Timestamp(), available_bytes: Nullable(t.Number()), total_bytes: Nullable(t.Number()) }),
      { description: 'free space over the window' },
    ),
  },
  { title: 'HostFilesystem' },
)

export const HostPoint = t.Object(
  {
    ts: Timestamp(),
    cpu_user: Nullable(t.Number({ description: 'percent of all CPUs' })),
    cpu_system: Nullable(t.Number()),
    cpu_iowait: Nullable(t.Number()),
    cpu_steal: Nullable(t.Number()),
    cpu_idle: Nullable(t.Number()),
    load1: Nullable(t.Number()),
    memory_total_bytes: Nullable(t.Number()),
    memory_available_bytes: Nullable(t.Number()),
    swap_total_bytes: Nullable(t.Number()),
    swap_used_bytes: Nullable(t.Number()),
  },
  { title: 'HostPoint' },
)

export const Host = t.Object(
  {
    on_host: t.Boolean({
      description: 'host figures arrive: an agent beside the database (or ClickHouse reporting its own host)',
    }),
    ts: Nullable(Timestamp()),
    source: Nullable(t.Union([t.Literal('proc'), t.Literal('clickhouse')])),
    evidence: Nullable(t.String({ description: 'why the agent believes it runs on the database host' })),
    note: Nullable(t.String({ description: 'why there are no host figures, as the agent said' })),
    cpu_count: Nullable(t.Number()),
    cpu: Nullable(
      t.Object(
        { user: t.Number(), system: t.Number(), iowait: t.Number(), steal: t.Number(), idle: t.Number() },
        { description: 'percent of all CPUs over the last cycle' },
      ),
    ),
    load: Nullable(t.Object({ load1: t.Number(), load5: t.Number(), load15: t.Number() })),
    memory: Nullable(
      t.Object({
        total_bytes: t.Number(),
        available_bytes: t.Number(),
        swap_total_bytes: Nullable(t.Number()),
        swap_used_bytes: Nullable(t.Number()),
      }),
    ),
    filesystems: t.Array(HostFilesystemView),
    devices: t.Array(
      t.Object({
        device: t.String(),
        reads: t.Number(),
        writes: t.Number(),
        read_bytes: t.Number(),
        write_bytes: t.Number(),
        busy_ms: t.Number(),
      }),
      { description: 'I/O of the devices behind the filesystems during the last cycle' },
    ),
    series: t.Array(HostPoint),
    database_size: Nullable(
      t.Object(
        { latest_bytes: Nullable(t.Number()), trend: Nullable(Trend) },
        {
          description:
            "the database's size (database_stats) and its growth over the last day: a trend even without host figures",
        },
      ),
    ),
  },
  { title: 'Host' },
)
