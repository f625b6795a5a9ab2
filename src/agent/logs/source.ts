// Where the log files are read from: the directory itself when the agent runs beside the server
// (pg_log_dir), or over SQL with pg_ls_logdir() and pg_read_binary_file() when the role may call them
// (superuser, or the GRANTs in the README). Both list the files with size and modification time and read
// a byte range; the SQL source reads in pieces so that no answer holds more than PIECE_BYTES.
import { closeSync, fstatSync, openSync, readdirSync, readSync, statSync } from 'node:fs'
import { join } from 'node:path'
import type postgres from 'postgres'

export interface LogFile {
  name: string
  size: number
  mtimeMs: number
  /** The file's inode (files source): a file replaced under the same name starts over; 0 when unknown. */
  ino: number
}

export interface LogSource {
  kind: 'files' | 'sql'
  list(): Promise<LogFile[]>
  /**
   * Up to `length` bytes from `offset` (fewer at the end of the file; none when it is gone). With `into`
   * (at least `length` bytes), a source that can reads into it and answers a view of it, so that a read
   * allocates nothing: the caller reuses one buffer for its slices.
   */
  read(name: string, offset: number, length: number, into?: Buffer): Promise<Buffer>
}

/** Largest byte range asked of pg_read_binary_file at once (its answer travels hex-encoded). */
const PIECE_BYTES = 4 * 1024 * 1024

export const LOG_FILE_NAME = /\.(log|csv|json)$/

export function fileSource(dir: string): LogSource {
  return {
    kind: 'files',
    async list() {
      const out: LogFile[] = []
      for (const name of readdirSync(dir)) {
        if (!LOG_FILE_NAME.test(name)) continue
        try {
          const st = statSync(join(dir, name))
          if (st.isFile()) out.push({ name, size: st.size, mtimeMs: st.mtimeMs, ino: st.ino })
        } catch {
          // Removed between the listing and its stat: not there.
        }
      }
      return out
    },
    async read(name, offset, length, into) {
      let fd: number
      try {
        fd = openSync(join(dir, name), 'r')
      } catch {
        return Buffer.alloc(0)
      }
      try {
        const size = fstatSync(fd).size
        const n = Math.max(0, Math.min(length, size - offset))
        const buffer = into && into.length >= n ? into : Buffer.allocUnsafe(n)
        let got = 0
        while (got < n) {
          const r = readSync(fd, buffer, got, n - got, offset + got)
          if (r <= 0) break
          got += r
        }
        return got === buffer.length ? buffer : buffer.subarray(0, got)
      } finally {
        closeSync(fd)
      }
    },
  }
}

export function sqlSource(sql: postgres.Sql, logDirectory: string): LogSource {
  const pathOf = (name: string) => `${logDirectory.replace(/\/+$/, '')}/${name}`
  return {
    kind: 'sql',
    async list() {
      const rows = await sql<{ name: string; size: string; mtime: number }[]>`
        SELECT name, size::text AS size, (extract(epoch FROM modification) * 1000)::float8 AS mtime FROM pg_ls_logdir()`
      return rows
        .filter((r) => LOG_FILE_NAME.test(r.name))
        .map((r) => ({ name: r.name, size: Number(r.size), mtimeMs: Number(r.mtime), ino: 0 }))
    },
    async read(name, offset, length) {
      const pieces: Buffer[] = []
      let done = 0
      while (done < length) {
        const want = Math.min(PIECE_BYTES, length - done)
        const [row] = await sql<
          { data: Buffer | null }[]
        >`SELECT pg_read_binary_file(${pathOf(name)}, ${offset + done}::bigint, ${want}::bigint, true) AS data`
        const data = row?.data
        if (!data || data.length === 0) break
        pieces.push(data)
        done += data.length
        if (data.length < want) break
      }
      return pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces)
    },
  }
}
