// The registered databases resource: the databases an organization monitors and their settings.
// reads.ts implements DatabaseReads, writes.ts DatabaseWrites (and registerFromBatch: ingest registers a
// database too); rows.ts reads a row as its record.

export type Engine = 'postgres' | 'clickhouse'

export interface RegisteredDatabase {
  id: string
  org_id: string
  name: string
  engine: Engine
  engine_version: string | null
  host: string
  port: number
  tags: Record<string, string>
  poll_interval_seconds: number
  collect_explain_plans: boolean
  collect_replication: boolean
  disabled_collectors: string[]
  created_at: number
  updated_at: number
  last_seen_at: number | null
}

export type NewDatabase = Pick<RegisteredDatabase, 'name' | 'engine' | 'host' | 'port' | 'tags'> & {
  engine_version: string | null
}

export type DatabasePatch = Partial<
  Pick<
    RegisteredDatabase,
    | 'name'
    | 'host'
    | 'port'
    | 'tags'
    | 'poll_interval_seconds'
    | 'collect_explain_plans'
    | 'collect_replication'
    | 'disabled_collectors'
  >
>

export type IngestResult =
  | {
      kind: 'applied' | 'duplicate'
      database: RegisteredDatabase
      /** Applied: the batch changed statement sums of closed hours (what ClosedHourSums keeps). */
      closedHoursChanged?: boolean
    }
  | { kind: 'limit' }
  | { kind: 'engine_mismatch'; database: RegisteredDatabase }

/** Reads of an organization's registered databases. */
export interface DatabaseReads {
  listDatabases(orgId: string): Promise<RegisteredDatabase[]>
  countDatabases(orgId: string): Promise<number>
  getDatabase(orgId: string, id: string): Promise<RegisteredDatabase | undefined>
}

/** Registering, changing and removing a database. */
export interface DatabaseWrites {
  /** Creates the database; `limit` (when given) is checked in the same transaction. */
  createDatabase(orgId: string, input: NewDatabase, now: number, limit?: number): Promise<RegisteredDatabase | 'limit'>
  updateDatabase(orgId: string, id: string, patch: DatabasePatch, now: number): Promise<RegisteredDatabase | undefined>
  deleteDatabase(orgId: string, id: string): Promise<boolean>
}
