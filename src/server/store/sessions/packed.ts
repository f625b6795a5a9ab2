// How session_snapshots keeps a snapshot's sessions and locks: JSON deflated, in base64.

/**
 * A snapshot's sessions or locks as stored: their JSON deflated, in base64 (TEXT in both stores). A
 * pgbench-like snapshot's 3.4 KB of JSON is 0.9 KB so (its field names and values repeat session after
 * session); PostgreSQL's TOAST compresses only values past about 2 KB, SQLite not at all, and the rows are
 * kept every poll for a day (docs/session-history.md). Deflating one takes about 0.15 ms.
 */
export function pack(value: unknown): string {
  return Buffer.from(Bun.deflateSync(Buffer.from(JSON.stringify(value)))).toString('base64')
}

/** The JSON text of a packed snapshot (a plain JSON array is read as it is). */
export function unpack(text: string): string {
  return Buffer.from(Bun.inflateSync(Buffer.from(text, 'base64'))).toString('utf8')
}
