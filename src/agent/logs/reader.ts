// Reads what PostgreSQL's log files gained since the last read, in bounded slices, and hands each whole
// entry to a callback. The position (an offset per file) is kept in the collector's state, which the agent
// saves with the batch that carries the entries (src/agent/state.ts): a restart goes on from the last sent
// entry, and entries read in a cycle whose batch was not kept are read again.
// - First start (no position): every file is taken as read to its end; only what comes later is read.
// - Rotation: files are read oldest first (modification time, then name); a new file is read from its
//   start, and the old file's tail is read before it, its last entry included (it will not grow).
// - Truncation (size below the offset) or a file replaced under the same name (another inode): from the start.
// - A file cut mid-entry: the read stops before that entry and takes it whole next time. The last entry of
//   the newest stderr file counts as whole once the file has been quiet for SETTLE_MS (its DETAIL and
//   STATEMENT lines come in the same write).
// - Backlog: at most `budgetBytes` per cycle, in slices of SLICE_BYTES; the rest is reported as backlog.
import type { RawLogEntry } from './entry.ts'
import { formatOfFile, type LogFormat, parseChunk } from './parse.ts'
import type { PrefixParser } from './prefix.ts'
import type { LogFile, LogSource } from './source.ts'

/** Where each file was read up to: name → [offset, inode]. */
export interface LogPosition {
  files: Record<string, [number, number]>
}

export const SLICE_BYTES = 4 * 1024 * 1024
export const DEFAULT_BUDGET_BYTES = 16 * 1024 * 1024
/** How long the newest stderr file must be unchanged before its last entry counts as whole. */
export const SETTLE_MS = 1_000

export interface ReadOptions {
  format: LogFormat
  prefix?: PrefixParser
  tzOffsetMs: number
  now: number
  budgetBytes?: number
  sliceBytes?: number
}

export interface ReadResult {
  position: LogPosition
  bytesRead: number
  backlogBytes: number
}

function ordered(files: LogFile[]): LogFile[] {
  return [...files].sort((a, b) => a.mtimeMs - b.mtimeMs || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
}

/** The position at the end of every file: where a first start begins. */
export function endPosition(files: LogFile[]): LogPosition {
  return { files: Object.fromEntries(files.map((f) => [f.name, [f.size, f.ino] as [number, number]])) }
}

export async function readLogs(source: LogSource, previous: LogPosition | undefined, options: ReadOptions, onEntry: (entry: RawLogEntry) => void): Promise<ReadResult> {
  const all = await source.list()
  const files = ordered(all.filter((f) => formatOfFile(f.name) === options.format))
  if (!previous) return { position: endPosition(all), bytesRead: 0, backlogBytes: 0 }
  const budget = options.budgetBytes ?? DEFAULT_BUDGET_BYTES
  const sliceBytes = options.sliceBytes ?? SLICE_BYTES
  const next: Record<string, [number, number]> = {}
  // Files of the other formats keep their place (a format switch later does not replay them).
  for (const f of all) if (!files.includes(f)) next[f.name] = [f.size, f.ino]
  let bytesRead = 0
  let backlog = 0
  const newest = files[files.length - 1]
  for (const file of files) {
    const known = previous.files[file.name]
    let offset = known && (known[1] === 0 || file.ino === 0 || known[1] === file.ino) && known[0] <= file.size ? known[0] : 0
    let stopped = false
    while (!stopped && offset < file.size && bytesRead < budget) {
      const want = Math.min(file.size - offset, sliceBytes, budget - bytesRead)
      const buf = await source.read(file.name, offset, want)
      if (buf.length === 0) break
      bytesRead += buf.length
      const reachesEnd = offset + buf.length >= file.size
      const isNewest = file === newest
      const closed = reachesEnd && !isNewest
      const settled = closed || (reachesEnd && options.now - file.mtimeMs >= SETTLE_MS)
      let parsed = parseChunk(buf, { format: options.format, prefix: options.prefix, tzOffsetMs: options.tzOffsetMs, settled, closed })
      if (parsed.consumed === 0 && buf.length === want && want === sliceBytes) {
        // One entry longer than a slice: taken as it is, so that the read moves on.
        parsed = parseChunk(buf, { format: options.format, prefix: options.prefix, tzOffsetMs: options.tzOffsetMs, settled: true, closed: true })
      }
      for (const entry of parsed.entries) onEntry(entry)
      offset += parsed.consumed
      // Stopped before an entry whose end is not written yet: read it whole next cycle.
      if (parsed.consumed < buf.length && reachesEnd) stopped = true
    }
    next[file.name] = [offset, file.ino]
    backlog += Math.max(0, file.size - offset)
  }
  return { position: { files: next }, bytesRead, backlogBytes: backlog }
}
