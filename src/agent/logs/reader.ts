// Reads what PostgreSQL's log files gained since the last read, in bounded slices, and hands each whole
// entry to a callback. The position (an offset per file) is kept in the collector's state, which the agent
// saves with the batch that carries the entries (src/agent/state.ts): a restart goes on from the last sent
// entry, and entries read in a cycle whose batch was not kept are read again.
// - First start (no position): every file is taken as read to its end; only what comes later is read.
// - Rotation: files are read oldest first (modification time, then name); a new file is read from its
//   start, and the old file's tail is read before it, its last entry included (it will not grow).
// - A switch of log_destination (stderr → csvlog → jsonlog ...): the files of a format the server no longer
//   writes (`finishedFormats`) are read to their end in their own format, in time order with the current
//   format's files, from their known position (from their start when they appeared since the last read) (lines PostgreSQL did not format, which the logging collector still
//   writes to the stderr file, are skipped there). A format the server still writes beside the one read
//   (two destinations) keeps its files at their end, so that no entry is counted twice.
// - Truncation (size below the offset) or a file replaced under the same name (another inode): from the start.
// - A file cut mid-entry: the read stops before that entry and takes it whole next time. The last entry of
//   the newest stderr file counts as whole once the file has been quiet for SETTLE_MS (its DETAIL and
//   STATEMENT lines come in the same write).
// - Backlog: at most `budgetBytes` per cycle, in slices of SLICE_BYTES (an entry longer than a slice gets a
//   longer one, up to MAX_SLICE_BYTES, past which it is cut); the rest is reported as backlog. Memory: one
//   read buffer per call, the slices' strings copied only for the entries kept (LogTally), and a full
//   garbage collection after every COLLECT_EVERY_BYTES of one call (a lighter one halfway), so that
//   reading a backlog of hundreds of MB takes a bounded amount of memory (JavaScriptCore otherwise lets
//   the heap grow by much more than the data it holds before collecting it).
// - The callback may refuse an entry (the cycle's batch is full): the read stops right before it, and the
//   position says so exactly, so that the next cycle starts with that entry.
import type { RawLogEntry } from './entry.ts'
import { formatOfFile, type LogFormat, parseEach } from './parse.ts'
import type { PrefixParser } from './prefix.ts'
import type { LogFile, LogSource } from './source.ts'

/** Where each file was read up to: name → [offset, inode]. */
export interface LogPosition {
  files: Record<string, [number, number]>
}

/**
 * A slice: what is decoded and parsed at once (its text and entries are garbage once it is handed over).
 * Half a MB: the garbage of 1 MB between collections left the agent's memory 2 to 4 MB higher
 * (bench/log-events-rss.ts).
 */
export const SLICE_BYTES = 512 * 1024
/** An entry longer than a slice is read again in a slice twice as long, up to this; past it, it is cut. */
export const MAX_SLICE_BYTES = 4 * 1024 * 1024
/** During a read of more than this, a full collection follows each such amount: the garbage stays bounded. */
export const COLLECT_EVERY_BYTES = 1024 * 1024
/**
 * Between the full collections, a lighter one (Bun.gc(false)) after each such amount: it costs no
 * measurable speed, where a full one per half MB cost about 8 %.
 */
export const LIGHT_COLLECT_EVERY_BYTES = 512 * 1024
export const DEFAULT_BUDGET_BYTES = 16 * 1024 * 1024
/** How long the newest stderr file must be unchanged before its last entry counts as whole. */
export const SETTLE_MS = 1_000

export interface ReadOptions {
  format: LogFormat
  /** Formats the server no longer writes: their files are read to their end (stderr with `prefix`). */
  finishedFormats?: LogFormat[]
  prefix?: PrefixParser
  tzOffsetMs: number
  now: number
  budgetBytes?: number
  sliceBytes?: number
  /**
   * Called once, before any byte is read, with how many bytes wait past the positions in the files this
   * read takes (the whole backlog, not only this read's budget).
   */
  onPending?: (bytes: number) => void
}

export interface ReadResult {
  position: LogPosition
  bytesRead: number
  backlogBytes: number
}

function ordered(files: LogFile[]): LogFile[] {
  return [...files].sort((a, b) => a.mtimeMs - b.mtimeMs || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
}

/** Where a file's read starts: its known offset, or 0 when it was truncated, replaced (another inode) or is new. */
function startOffset(file: LogFile, known: [number, number] | undefined): number {
  return known && (known[1] === 0 || file.ino === 0 || known[1] === file.ino) && known[0] <= file.size ? known[0] : 0
}

/** The position at the end of every file: where a first start begins. */
export function endPosition(files: LogFile[]): LogPosition {
  return { files: Object.fromEntries(files.map((f) => [f.name, [f.size, f.ino] as [number, number]])) }
}

/** Takes one entry; false refuses it, and the read stops before it. */
export type EntryHandler = (entry: RawLogEntry) => boolean | undefined

export async function readLogs(
  source: LogSource,
  previous: LogPosition | undefined,
  options: ReadOptions,
  onEntry: EntryHandler,
): Promise<ReadResult> {
  const all = await source.list()
  const files = ordered(all.filter((f) => formatOfFile(f.name) === options.format))
  if (!previous) return { position: endPosition(all), bytesRead: 0, backlogBytes: 0 }
  const finished = options.finishedFormats ?? []
  // The files of a format the server stopped writing (one it wrote since the last read is read whole).
  const tails = all.filter((f) => finished.includes(formatOfFile(f.name)))
  const budget = options.budgetBytes ?? DEFAULT_BUDGET_BYTES
  const sliceBytes = options.sliceBytes ?? SLICE_BYTES
  const next: Record<string, [number, number]> = {}
  // Files of the other formats keep their place (a format switch later does not replay them).
  for (const f of all) if (!files.includes(f) && !tails.includes(f)) next[f.name] = [f.size, f.ino]
  let bytesRead = 0
  let backlog = 0
  let refused = false
  // One buffer for the cycle's slices (a source that can reads into it): a slice's bytes are garbage as
  // soon as it is parsed, and buffers outside the JavaScript heap do not hasten a collection.
  const scratch = Buffer.allocUnsafeSlow(Math.min(sliceBytes, budget))
  let sinceCollect = 0
  let lightCollected = 0
  const reads = ordered([...tails, ...files])
  if (options.onPending)
    options.onPending(reads.reduce((sum, f) => sum + f.size - startOffset(f, previous.files[f.name]), 0))
  const longest = Math.min(Math.max(sliceBytes, MAX_SLICE_BYTES), budget)
  const newest = files[files.length - 1]
  for (const file of reads) {
    const format = tails.includes(file) ? formatOfFile(file.name) : options.format
    let offset = startOffset(file, previous.files[file.name])
    let stopped = false
    let size = sliceBytes
    while (!stopped && !refused && offset < file.size && bytesRead < budget) {
      const want = Math.min(file.size - offset, size, budget - bytesRead)
      const buf = await source.read(file.name, offset, want, scratch)
      if (buf.length === 0) break
      bytesRead += buf.length
      const reachesEnd = offset + buf.length >= file.size
      const isNewest = file === newest
      const closed = reachesEnd && !isNewest
      const settled = closed || (reachesEnd && options.now - file.mtimeMs >= SETTLE_MS)
      // Entries go to the callback as they are parsed (none is held in an array): where the last one
      // handed over ends is where a refused read stops.
      const tail = format !== options.format
      let lastEnd = 0
      const handle = (entry: RawLogEntry, end: number): boolean => {
        if (!(tail && entry.foreign) && onEntry(entry) === false) {
          refused = true
          return false
        }
        lastEnd = end
        return true
      }
      let consumed = parseEach(
        buf,
        { format, prefix: options.prefix, tzOffsetMs: options.tzOffsetMs, settled, closed },
        handle,
      )
      if (!refused && consumed === 0 && buf.length === want && !reachesEnd) {
        // One entry longer than the slice (none was handed over): read again in a longer one; longer than
        // the longest read there can be, taken as it is (cut), so that the read moves on.
        if (want === size && size < longest) {
          size = Math.min(size * 2, longest)
          continue
        }
        if (want === longest)
          consumed = parseEach(
            buf,
            { format, prefix: options.prefix, tzOffsetMs: options.tzOffsetMs, settled: true, closed: true },
            handle,
          )
      }
      size = sliceBytes
      offset += refused ? lastEnd : consumed
      // Stopped before an entry whose end is not written yet: read it whole next cycle.
      if (consumed < buf.length && reachesEnd) stopped = true
      sinceCollect += buf.length
      if (sinceCollect >= COLLECT_EVERY_BYTES) {
        sinceCollect = 0
        lightCollected = 0
        Bun.gc(true)
      } else if (sinceCollect - lightCollected >= LIGHT_COLLECT_EVERY_BYTES) {
        lightCollected = sinceCollect
        Bun.gc(false)
      }
    }
    next[file.name] = [offset, file.ino]
    backlog += Math.max(0, file.size - offset)
  }
  return { position: { files: next }, bytesRead, backlogBytes: backlog }
}
