// The agent's disk buffer for one database: batches the API could not take wait in
// `service_buffer_{name}.db` (bun:sqlite), oldest first, until the server acknowledges them or they
// are older than the buffer lifetime (1 h). A batch is deleted only once accepted; the file is
// created on the first batch and removed once the buffer is drained.
import { Database } from 'bun:sqlite'
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, rmSync } from 'node:fs'
import { join } from 'node:path'

export interface BufferedBatch {
  id: string
  createdAt: number
  body: string
}

export function bufferFileName(databaseName: string): string {
  return `service_buffer_${databaseName.replace(/[^A-Za-z0-9._-]/g, '_')}.db`
}

export class DiskBuffer {
  readonly path: string
  private db: Database | undefined

  constructor(
    dir: string,
    databaseName: string,
    private readonly maxAgeMs: number,
  ) {
    this.path = join(dir, bufferFileName(databaseName))
    // A file left by an earlier run (the agent stopped during an outage) is picked up again.
    if (existsSync(this.path)) this.open()
  }

  private open(): Database {
    if (!this.db) {
      mkdirSync(join(this.path, '..'), { recursive: true })
      // The batches hold query texts: the file is the agent user's alone (SQLite gives its -wal and
      // -shm files the same mode).
      closeSync(openSync(this.path, 'a', 0o600))
      chmodSync(this.path, 0o600)
      this.db = new Database(this.path, { create: true })
      this.db.exec('PRAGMA journal_mode = WAL')
      this.db.exec('PRAGMA synchronous = NORMAL')
      this.db.exec(
        'CREATE TABLE IF NOT EXISTS batches (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, created_at INTEGER NOT NULL, body TEXT NOT NULL)',
      )
    }
    return this.db
  }

  /** Number of batches waiting. */
  size(): number {
    if (!this.db) return 0
    return (this.db.query('SELECT COUNT(*) AS n FROM batches').get() as { n: number }).n
  }

  add(batch: BufferedBatch): void {
    this.open().query('INSERT OR IGNORE INTO batches (id, created_at, body) VALUES (?1, ?2, ?3)').run(batch.id, batch.createdAt, batch.body)
  }

  /** The oldest waiting batches, in the order they were added. */
  oldest(limit: number): BufferedBatch[] {
    if (!this.db) return []
    return (this.db.query('SELECT id, created_at, body FROM batches ORDER BY seq LIMIT ?1').all(limit) as { id: string; created_at: number; body: string }[]).map(
      (r) => ({ id: r.id, createdAt: r.created_at, body: r.body }),
    )
  }

  /** The server took the batch (or refused it for good): delete it; remove the file once empty. */
  accept(id: string): void {
    if (!this.db) return
    this.db.query('DELETE FROM batches WHERE id = ?1').run(id)
    if (this.size() === 0) this.removeFile()
  }

  /** Drops batches older than the buffer lifetime; returns how many. */
  dropExpired(now: number): number {
    if (!this.db) return 0
    const dropped = this.db.query('DELETE FROM batches WHERE created_at < ?1').run(now - this.maxAgeMs).changes
    if (this.size() === 0) this.removeFile()
    return dropped
  }

  private removeFile(): void {
    this.db?.close()
    this.db = undefined
    for (const suffix of ['', '-wal', '-shm']) rmSync(`${this.path}${suffix}`, { force: true })
  }

  /** Closes the file, keeping what it holds for the next start. */
  close(): void {
    this.db?.close()
    this.db = undefined
  }
}
