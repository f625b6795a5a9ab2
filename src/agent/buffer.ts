// The agent's disk buffer for one database: batches the API could not take wait in
// `service_buffer_{name}.db` (bun:sqlite), oldest first, until the server acknowledges them (or refuses
// them as malformed) or they are older than the buffer lifetime (1 h). The file is created on the first
// batch and removed once the buffer is drained; it never holds more than about `maxBytes` of batches
// (the oldest make room for a new one).
// No operation throws: a failure (a full disk, an unwritable directory) is reported through
// `events.fault` and answered with a safe value, so the agent keeps collecting; the next write that
// works reports `events.working`. A file that is corrupt or unreadable is renamed
// `<file>.corrupt-<timestamp>` with an error log, and a fresh buffer takes its place.
import { Database } from 'bun:sqlite'
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, renameSync, rmSync, statSync } from 'node:fs'
import { CREATE_NO_FOLLOW, unsafeFileReason } from './own-file.ts'
import { dirname, join } from 'node:path'
import type { AgentLogger } from './collectors/types.ts'

export interface BufferedBatch {
  id: string
  createdAt: number
  body: string
}

export type BufferOperation = 'open' | 'add' | 'read' | 'accept' | 'drop expired' | 'count' | 'probe' | 'close'

export interface BufferEvents {
  /** An operation failed; `cause` is the error's message with its code. */
  fault(operation: BufferOperation, cause: string): void
  /** A write went through: the buffer keeps batches again. */
  working(): void
}

export interface DiskBufferOptions {
  /** How long a batch is kept (spec: 1 h). */
  maxAgeMs: number
  /** Most bytes of batches the file holds (buffer.max_bytes); read at each add, so a reload applies. */
  maxBytes: () => number
  log: AgentLogger
  events?: BufferEvents
  clock?: () => number
}

export type AddResult = { kept: true; evicted: number } | { kept: false; reason: string }

export function bufferFileName(databaseName: string): string {
  return `service_buffer_${databaseName.replace(/[^A-Za-z0-9._-]/g, '_')}.db`
}

/** Error codes of a file that cannot be used as it is: moved aside rather than retried forever. */
const CORRUPT_FILE_CODES = /^(SQLITE_NOTADB|SQLITE_CORRUPT)/
/** At start, also a file that cannot be opened at all (a directory in its place, say). */
const UNREADABLE_FILE_CODES = /^(SQLITE_NOTADB|SQLITE_CORRUPT|SQLITE_CANTOPEN|EISDIR)/

function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'string' ? code : undefined
}

function describeError(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error)
  const code = errorCode(error)
  return code && !message.includes(code) ? `${code}: ${message}` : message
}

/** Bytes a row's pages take besides its body (record header, cell pointer, page fill). */
const ROW_OVERHEAD_BYTES = 64
const PROBE_BYTES = 64 * 1024

export class DiskBuffer {
  readonly path: string
  private db: Database | undefined
  /** The last count read, reported while the file cannot be read. */
  private count = 0
  private readonly clock: () => number

  constructor(
    dir: string,
    private readonly databaseName: string,
    private readonly options: DiskBufferOptions,
  ) {
    this.path = join(dir, bufferFileName(databaseName))
    this.clock = options.clock ?? Date.now
    // A file left by an earlier run (the agent stopped during an outage) is picked up again, after a
    // check that it is readable.
    if (existsSync(this.path)) {
      try {
        this.open(true)
        this.count = this.countRows()
      } catch (e) {
        this.fail('open', e, UNREADABLE_FILE_CODES)
      }
    }
  }

  /** Opens (creating when absent) the file; throws on failure. `check` verifies an existing file first. */
  private open(check = false): Database {
    if (this.db) return this.db
    mkdirSync(dirname(this.path), { recursive: true })
    // The batches hold query texts: the file is the agent user's alone (SQLite gives its -wal and
    // -shm files the same mode), and one planted by another user is not used.
    for (const file of [this.path, `${this.path}-wal`, `${this.path}-shm`]) {
      const unsafe = unsafeFileReason(file)
      if (unsafe)
        throw Object.assign(new Error(`${file} cannot be used for the buffer: ${unsafe}`), { code: 'EUNSAFE' })
    }
    closeSync(openSync(this.path, CREATE_NO_FOLLOW, 0o600))
    chmodSync(this.path, 0o600)
    const db = new Database(this.path, { create: true })
    try {
      if (check) {
        const result = db.query('PRAGMA quick_check').values()
        const verdict = String(result[0]?.[0] ?? '')
        if (verdict !== 'ok')
          throw Object.assign(new Error(`integrity check failed: ${verdict.slice(0, 200)}`), { code: 'SQLITE_CORRUPT' })
      }
      db.exec('PRAGMA journal_mode = WAL')
      db.exec('PRAGMA synchronous = NORMAL')
      // The write-ahead log is cut back to 1 MB at each checkpoint instead of keeping its largest size,
      // which on a small, full file system left no room for the deletes that free the buffer.
      db.exec('PRAGMA journal_size_limit = 1048576')
      db.exec(
        'CREATE TABLE IF NOT EXISTS batches (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, created_at INTEGER NOT NULL, body TEXT NOT NULL)',
      )
    } catch (e) {
      db.close()
      // A file this open just created and could not fill is not left behind (the buffer is "absent").
      if (!check && this.fileIsEmpty()) this.removeFiles()
      throw e
    }
    this.db = db
    return db
  }

  private fileIsEmpty(): boolean {
    try {
      return statSync(this.path).size === 0
    } catch {
      return false
    }
  }

  /** Reports a failed operation; a file that cannot be used as it is (`unusable`) is moved aside. */
  private fail(operation: BufferOperation, error: unknown, unusable = CORRUPT_FILE_CODES): void {
    let cause = describeError(error)
    const code = errorCode(error)
    if (code && unusable.test(code) && existsSync(this.path)) {
      const renameError = this.moveAside(cause)
      if (renameError === null) return
      cause = `${cause}; moving the file aside failed: ${renameError}`
    }
    this.options.events?.fault(operation, cause)
  }

  /** Renames the file (and its -wal/-shm) to `<file>.corrupt-<timestamp>`; null when moved, else why not. */
  private moveAside(cause: string): string | null {
    this.closeQuietly()
    const stamp = new Date(this.clock()).toISOString().replace(/[:.]/g, '-')
    const target = `${this.path}.corrupt-${stamp}`
    try {
      renameSync(this.path, target)
      for (const suffix of ['-wal', '-shm'])
        if (existsSync(this.path + suffix)) renameSync(this.path + suffix, target + suffix)
    } catch (e) {
      return describeError(e)
    }
    this.options.log.error('the buffer file is corrupt or unreadable; moved aside, its batches will not be sent', {
      database: this.databaseName,
      file: this.path,
      moved_to: target,
      cause,
    })
    this.count = 0
    return null
  }

  private countRows(): number {
    if (!this.db) return 0
    return (this.db.query('SELECT COUNT(*) AS n FROM batches').get() as { n: number }).n
  }

  /** Number of batches waiting (the last known number while the file cannot be read). */
  size(): number {
    if (!this.db) return this.count
    try {
      this.count = this.countRows()
    } catch (e) {
      this.fail('count', e)
    }
    return this.count
  }

  /** Bytes of the waiting batches' bodies (0 while none waits or the file cannot be read). */
  bytes(): number {
    if (!this.db) return 0
    try {
      return Number(
        (this.db.query('SELECT COALESCE(SUM(LENGTH(CAST(body AS BLOB))), 0) AS n FROM batches').get() as { n: number })
          .n,
      )
    } catch {
      return 0
    }
  }

  /** When the oldest waiting batch was added, or null when none waits (or the file cannot be read). */
  oldestCreatedAt(): number | null {
    if (!this.db) return null
    try {
      const row = this.db.query('SELECT created_at FROM batches ORDER BY seq LIMIT 1').get() as {
        created_at: number
      } | null
      return row?.created_at ?? null
    } catch (e) {
      this.fail('read', e)
      return null
    }
  }

  /**
   * Keeps the batch behind the others. When the file would grow past maxBytes the oldest batches make
   * room (`evicted` says how many); a batch larger than maxBytes by itself is not kept.
   */
  add(batch: BufferedBatch): AddResult {
    const bytes = Buffer.byteLength(batch.body)
    const maxBytes = this.options.maxBytes()
    if (bytes + ROW_OVERHEAD_BYTES > maxBytes)
      return { kept: false, reason: `the batch (${bytes} bytes) is larger than buffer.max_bytes (${maxBytes})` }
    try {
      const db = this.open()
      const evicted = db.transaction(() => {
        const dropped = this.makeRoom(db, bytes + ROW_OVERHEAD_BYTES, maxBytes)
        db.query('INSERT OR IGNORE INTO batches (id, created_at, body) VALUES (?1, ?2, ?3)').run(
          batch.id,
          batch.createdAt,
          batch.body,
        )
        return dropped
      })()
      this.count = this.countRows()
      this.options.events?.working()
      return { kept: true, evicted }
    } catch (e) {
      this.fail('add', e)
      return { kept: false, reason: `the buffer cannot keep it (${describeError(e)})` }
    }
  }

  /** Bytes the file's live pages take (free pages left by deleted batches are reused first). */
  private usedBytes(db: Database): number {
    const pragma = (name: string) => Number((db.query(`PRAGMA ${name}`).values()[0] ?? [0])[0])
    return (pragma('page_count') - pragma('freelist_count')) * pragma('page_size')
  }

  /** Deletes the oldest batches until `needed` more bytes fit under `maxBytes`; returns how many. */
  private makeRoom(db: Database, needed: number, maxBytes: number): number {
    const excess = this.usedBytes(db) + needed - maxBytes
    if (excess <= 0) return 0
    let freed = 0
    let lastSeq: number | undefined
    let count = 0
    for (const row of db
      .query('SELECT seq, LENGTH(CAST(body AS BLOB)) AS bytes FROM batches ORDER BY seq')
      .iterate() as IterableIterator<{
      seq: number
      bytes: number
    }>) {
      freed += row.bytes + ROW_OVERHEAD_BYTES
      lastSeq = row.seq
      count++
      if (freed >= excess) break
    }
    if (lastSeq === undefined) return 0
    db.query('DELETE FROM batches WHERE seq <= ?1').run(lastSeq)
    return count
  }

  /** The oldest waiting batches, in the order they were added; null when the file cannot be read. */
  oldest(limit: number): BufferedBatch[] | null {
    if (!this.db) return []
    try {
      return (
        this.db.query('SELECT id, created_at, body FROM batches ORDER BY seq LIMIT ?1').all(limit) as {
          id: string
          created_at: number
          body: string
        }[]
      ).map((r) => ({ id: r.id, createdAt: r.created_at, body: r.body }))
    } catch (e) {
      this.fail('read', e)
      return null
    }
  }

  /** The server took the batch (or refused it for good): delete it; remove the file once empty. False when the delete failed. */
  accept(id: string): boolean {
    if (!this.db) return true
    try {
      this.deleteBatch(id)
      return true
    } catch (e) {
      // A full disk: a checkpoint moves the log into the file and truncates it, which may make the room
      // the delete needs.
      if (errorCode(e)?.startsWith('SQLITE_FULL')) {
        try {
          this.db.exec('PRAGMA wal_checkpoint(TRUNCATE)')
          this.deleteBatch(id)
          return true
        } catch {}
      }
      this.fail('accept', e)
      return false
    }
  }

  private deleteBatch(id: string): void {
    this.db!.query('DELETE FROM batches WHERE id = ?1').run(id)
    this.count = this.countRows()
    if (this.count === 0) this.removeFiles()
  }

  /** Drops batches older than the buffer lifetime; returns how many. */
  dropExpired(now: number): number {
    if (!this.db) return 0
    try {
      const dropped = this.db
        .query('DELETE FROM batches WHERE created_at < ?1')
        .run(now - this.options.maxAgeMs).changes
      this.count = this.countRows()
      if (this.count === 0) this.removeFiles()
      return dropped
    } catch (e) {
      this.fail('drop expired', e)
      return 0
    }
  }

  /**
   * Tries a write of a small batch's size (and takes it back): while the buffer is failing this tells
   * when it works again although the API takes every batch directly. True when the write went through.
   */
  probe(): boolean {
    try {
      const db = this.open()
      db.exec('CREATE TABLE IF NOT EXISTS probe (filler BLOB)')
      db.query('INSERT INTO probe VALUES (zeroblob(?1))').run(PROBE_BYTES)
      db.exec('DELETE FROM probe')
      this.count = this.countRows()
      if (this.count === 0) this.removeFiles()
      this.options.events?.working()
      return true
    } catch (e) {
      this.fail('probe', e)
      return false
    }
  }

  private closeQuietly(): void {
    try {
      this.db?.close()
    } catch {
      // Closing releases the handle even when the final checkpoint fails; nothing else to do.
    }
    this.db = undefined
  }

  private removeFiles(): void {
    this.closeQuietly()
    for (const suffix of ['', '-wal', '-shm']) rmSync(`${this.path}${suffix}`, { force: true })
  }

  /** Closes the file, keeping what it holds for the next start. */
  close(): void {
    this.closeQuietly()
  }
}
