// One sample of the host an agent shares with its database: CPU shares since the previous sample (none
// on the first), load, memory and swap, and the filesystems of the given paths — one entry per
// filesystem (st_dev) with every role it holds — with their mount, device and the I/O of those devices
// since the previous sample. The caller keeps `HostMemory` between cycles (new objects each time).
import type { HostDevice, HostFilesystem, HostStatus } from '../../shared/wire.ts'
import { ingestMaxItems } from '../../shared/ingest-limits.ts'
import {
  type CpuTimes,
  type DiskCounters,
  type FsFigures,
  cpuShares,
  measurePath,
  mountOf,
  parseDiskstats,
  parseLoadavg,
  parseMeminfo,
  parseMountinfo,
  parseProcStat,
  readBounded,
} from './proc.ts'

/** What a path holds for the database: `data`, `wal`, `log`, `tablespace:<name>`. */
export interface RolePath {
  role: string
  path: string
}

export interface HostMemory {
  cpu?: CpuTimes
  /** Device counters by major:minor at the previous sample. */
  disks?: Record<string, DiskCounters>
}

export interface HostSample {
  status: Omit<HostStatus, 'source' | 'evidence'>
  memory: HostMemory
  /** Paths that could not be measured, with why. */
  problems: string[]
}

const MAX_ROLE = 200
const MAX_PATH = 1_000
const clean = (s: string, max: number) => s.replaceAll('\u0000', '').slice(0, max)

/** Reads a file, or undefined when it cannot (a missing /proc file is not the cycle's failure). */
async function optional(path: string): Promise<string | undefined> {
  try {
    return await readBounded(path)
  } catch {
    return undefined
  }
}

export async function sampleHost(paths: RolePath[], previous: HostMemory): Promise<HostSample> {
  const [statText, loadText, memText, mountText, diskText] = await Promise.all(
    ['/proc/stat', '/proc/loadavg', '/proc/meminfo', '/proc/self/mountinfo', '/proc/diskstats'].map(optional),
  )
  const memory: HostMemory = {}
  const stat = statText === undefined ? { total: null, cpus: 0 } : parseProcStat(statText)
  if (stat.total) memory.cpu = stat.total
  const cpu = previous.cpu && stat.total ? cpuShares(previous.cpu, stat.total) : null

  const problems: string[] = []
  const measured = await Promise.all(
    paths.map(async (p) => {
      try {
        return { ...p, figures: await measurePath(p.path) }
      } catch (e) {
        problems.push(`${p.role} (${p.path}): ${(e as Error).message}`)
        return undefined
      }
    }),
  )
  const mounts = mountText === undefined ? [] : parseMountinfo(mountText)
  const byDev = new Map<string, { roles: string[]; path: string; figures: FsFigures }>()
  for (const m of measured) {
    if (!m) continue
    const entry = byDev.get(m.figures.dev)
    if (entry) {
      if (!entry.roles.includes(m.role)) entry.roles.push(m.role)
    } else byDev.set(m.figures.dev, { roles: [m.role], path: m.path, figures: m.figures })
  }
  const counters = diskText === undefined ? new Map<string, DiskCounters>() : parseDiskstats(diskText)
  const filesystems: HostFilesystem[] = []
  const deviceNumbers = new Set<string>()
  for (const [dev, entry] of [...byDev].slice(0, ingestMaxItems.host_filesystems)) {
    const mount = mountOf(mounts, entry.path, dev)
    if (counters.has(dev)) deviceNumbers.add(dev)
    const device =
      counters.get(dev)?.name ?? (mount?.source.startsWith('/dev/') ? mount.source.slice(5) : (mount?.source ?? null))
    filesystems.push({
      roles: entry.roles.slice(0, 32).map((r) => clean(r, MAX_ROLE)),
      path: clean(entry.path, MAX_PATH),
      mount: mount ? clean(mount.mountPoint, 1_000) : null,
      device: device === null ? null : clean(device, 1_000),
      total_bytes: entry.figures.total_bytes,
      available_bytes: entry.figures.available_bytes,
      inodes_total: entry.figures.inodes_total,
      inodes_available: entry.figures.inodes_available,
    })
  }
  memory.disks = Object.fromEntries([...deviceNumbers].map((d) => [d, counters.get(d)!]))
  const devices: HostDevice[] = []
  for (const d of deviceNumbers) {
    const now = counters.get(d)!
    const before = previous.disks?.[d]
    if (!before || before.name !== now.name) continue
    const delta = (k: 'reads' | 'writes' | 'readBytes' | 'writeBytes' | 'busyMs') => Math.max(0, now[k] - before[k])
    devices.push({
      device: clean(now.name, 200),
      reads: delta('reads'),
      writes: delta('writes'),
      read_bytes: delta('readBytes'),
      write_bytes: delta('writeBytes'),
      busy_ms: delta('busyMs'),
    })
  }
  return {
    status: {
      cpu_count: stat.cpus > 0 ? stat.cpus : null,
      cpu,
      load: loadText === undefined ? null : parseLoadavg(loadText),
      memory: memText === undefined ? null : parseMeminfo(memText),
      filesystems,
      devices: devices.slice(0, ingestMaxItems.host_devices),
    },
    memory,
    problems,
  }
}
