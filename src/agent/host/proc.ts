// The host's figures as Linux tells them: /proc/stat (CPU time), /proc/loadavg, /proc/meminfo,
// /proc/self/mountinfo (which mount and device hold a path), /proc/diskstats (I/O per device) and
// statfs (free space and inodes). Every read is bounded in bytes and in time: a file past its cap is
// cut, and a call that does not answer in time (statfs on a hung network mount) is given up on, so the
// cycle never waits on it. Off Linux none of this exists: `hostProcAvailable()` says so.
import { open, stat, statfs } from 'node:fs/promises'

/** A /proc file is read up to this many bytes (mountinfo on a host with thousands of mounts is the largest). */
const MAX_PROC_BYTES = 1 << 20
/** A file system call that takes longer is abandoned (its result, when it comes, is ignored). */
export const HOST_CALL_TIMEOUT_MS = 2_000

export function hostProcAvailable(): boolean {
  return process.platform === 'linux'
}

/** `promise`, or a rejection naming `what` once `ms` passed. */
export function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

/** At most `max` bytes of a file as text (UTF-8, invalid bytes replaced), under the call deadline. */
export async function readBounded(
  path: string,
  max = MAX_PROC_BYTES,
  timeoutMs = HOST_CALL_TIMEOUT_MS,
): Promise<string> {
  const read = async () => {
    const handle = await open(path, 'r')
    try {
      const buffer = Buffer.alloc(Math.min(max, 64 * 1024))
      const chunks: Buffer[] = []
      let total = 0
      while (total < max) {
        const { bytesRead } = await handle.read(buffer, 0, Math.min(buffer.length, max - total), null)
        if (bytesRead === 0) break
        chunks.push(Buffer.from(buffer.subarray(0, bytesRead)))
        total += bytesRead
      }
      return Buffer.concat(chunks).toString('utf8')
    } finally {
      await handle.close()
    }
  }
  return within(read(), timeoutMs, path)
}

/** Jiffies per CPU state, summed over all CPUs (the `cpu` line of /proc/stat). */
export interface CpuTimes {
  user: number
  nice: number
  system: number
  idle: number
  iowait: number
  irq: number
  softirq: number
  steal: number
}

export function parseProcStat(text: string): { total: CpuTimes | null; cpus: number } {
  let total: CpuTimes | null = null
  let cpus = 0
  for (const line of text.split('\n')) {
    if (/^cpu\d+\s/.test(line)) cpus++
    else if (line.startsWith('cpu ')) {
      const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = line
        .trim()
        .split(/\s+/)
        .slice(1)
        .map(Number)
      total = { user, nice, system, idle, iowait, irq, softirq, steal }
    }
  }
  return { total, cpus }
}

/** Shares (percent) of CPU time between two samples; null when no time passed or the counters went back. */
export function cpuShares(before: CpuTimes, after: CpuTimes) {
  const d = (k: keyof CpuTimes) => after[k] - before[k]
  const keys = Object.keys(after) as (keyof CpuTimes)[]
  if (keys.some((k) => d(k) < 0)) return null
  const all = keys.reduce((sum, k) => sum + d(k), 0)
  if (all <= 0) return null
  const share = (n: number) => Math.min(100, Math.max(0, Number(((n / all) * 100).toFixed(2))))
  return {
    // user includes nice, system the interrupt time: what `top` shows as us+ni and sy+hi+si.
    user: share(d('user') + d('nice')),
    system: share(d('system') + d('irq') + d('softirq')),
    iowait: share(d('iowait')),
    steal: share(d('steal')),
    idle: share(d('idle')),
  }
}

export function parseLoadavg(text: string): { load1: number; load5: number; load15: number } | null {
  const [a, b, c] = text.trim().split(/\s+/).map(Number)
  if (![a, b, c].every((n) => Number.isFinite(n) && n! >= 0)) return null
  return { load1: a!, load5: b!, load15: c! }
}

/** MemTotal, MemAvailable, SwapTotal and SwapFree in bytes (/proc/meminfo gives kB). */
export function parseMeminfo(text: string) {
  const kb = new Map<string, number>()
  for (const line of text.split('\n')) {
    const m = /^(\w+):\s+(\d+)\s*kB/.exec(line)
    if (m) kb.set(m[1]!, Number(m[2]) * 1024)
  }
  const total = kb.get('MemTotal')
  const available = kb.get('MemAvailable')
  if (total === undefined || available === undefined) return null
  const swapTotal = kb.get('SwapTotal') ?? 0
  const swapFree = kb.get('SwapFree') ?? 0
  return {
    total_bytes: total,
    available_bytes: available,
    swap_total_bytes: swapTotal,
    swap_used_bytes: Math.max(0, swapTotal - swapFree),
  }
}

export interface Mount {
  /** major:minor of the mounted device. */
  devno: string
  mountPoint: string
  fsType: string
  source: string
}

/** mountinfo escapes space, tab, newline and backslash as \ooo. */
const unescapeMount = (s: string) =>
  s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8)))

export function parseMountinfo(text: string): Mount[] {
  const mounts: Mount[] = []
  for (const line of text.split('\n')) {
    const parts = line.split(' ')
    const dash = parts.indexOf('-')
    if (parts.length < 10 || dash < 6) continue
    mounts.push({
      devno: parts[2]!,
      mountPoint: unescapeMount(parts[4]!),
      fsType: parts[dash + 1] ?? '',
      source: unescapeMount(parts[dash + 2] ?? ''),
    })
  }
  return mounts
}

/** The mount holding `realPath`: the longest mount point that is a prefix of it, among those of its device. */
export function mountOf(mounts: Mount[], realPath: string, devno: string | null): Mount | undefined {
  const within = (m: Mount) =>
    m.mountPoint === '/' || realPath === m.mountPoint || realPath.startsWith(`${m.mountPoint}/`)
  const candidates = mounts.filter((m) => within(m) && (devno === null || m.devno === devno))
  const pool = candidates.length > 0 ? candidates : mounts.filter(within)
  // The last of equally long mount points is the one on top (mountinfo lists mounts in mount order).
  let best: Mount | undefined
  for (const m of pool) if (!best || m.mountPoint.length >= best.mountPoint.length) best = m
  return best
}

/** Cumulative counters of one device in /proc/diskstats (sectors are 512 bytes whatever the device's). */
export interface DiskCounters {
  name: string
  reads: number
  readBytes: number
  writes: number
  writeBytes: number
  busyMs: number
}

export function parseDiskstats(text: string): Map<string, DiskCounters> {
  const out = new Map<string, DiskCounters>()
  for (const line of text.split('\n')) {
    const f = line.trim().split(/\s+/)
    if (f.length < 14) continue
    const n = f.map(Number)
    out.set(`${f[0]}:${f[1]}`, {
      name: f[2]!,
      reads: n[3]!,
      readBytes: n[5]! * 512,
      writes: n[7]!,
      writeBytes: n[9]! * 512,
      busyMs: n[12]!,
    })
  }
  return out
}

/** Linux's dev_t split into major:minor (glibc's gnu_dev_major / gnu_dev_minor). */
export function devno(dev: number | bigint): string {
  const d = BigInt(dev)
  const major = ((d >> 8n) & 0xfffn) | ((d >> 32n) & ~0xfffn)
  const minor = (d & 0xffn) | ((d >> 12n) & ~0xffn)
  return `${major}:${minor}`
}

export interface FsFigures {
  /** st_dev of the path: paths with equal ones share a filesystem. */
  dev: string
  total_bytes: number
  available_bytes: number
  inodes_total: number | null
  inodes_available: number | null
}

/** statfs and stat of a path, under the call deadline. */
export async function measurePath(path: string): Promise<FsFigures> {
  const [s, st] = await within(
    Promise.all([statfs(path), stat(path)]),
    HOST_CALL_TIMEOUT_MS,
    `statfs(${JSON.stringify(path)})`,
  )
  const frsize = Number((s as { frsize?: number }).frsize ?? s.bsize)
  return {
    dev: devno(st.dev),
    total_bytes: Number(s.blocks) * frsize,
    available_bytes: Number(s.bavail) * frsize,
    // Filesystems without a fixed inode table (btrfs, some network ones) report 0 files.
    inodes_total: Number(s.files) > 0 ? Number(s.files) : null,
    inodes_available: Number(s.files) > 0 ? Number(s.ffree) : null,
  }
}
