// The API's answers that the per-database pages read, as the README's endpoint sections describe them.
// Where the API sends a store type as it is (times aside), the type is the store's (types only: erased
// from the bundle).
import type { Static } from '@sinclair/typebox'
import type { Database as DatabaseSchema, Engine as EngineSchema } from '../../../shared/api/databases.ts'
import type { Loaded } from '../../components/ui.tsx'

export type Engine = Static<typeof EngineSchema>
export type Severity = 'critical' | 'warning' | 'info'

/** A registered database as the API sends it (src/shared/api/databases.ts). */
export type Database = Static<typeof DatabaseSchema>

export interface Finding {
  rule: string
  key: string
  severity: Severity
  category: string
  title: string
  detail: string
  recommendation: string
  how_to_investigate: string[]
  how_to_fix: string[]
  how_to_fix_locked?: string
  objects: string[]
  metrics: Record<string, number | string | null>
  /** When the data the finding was drawn from was collected (epoch ms as the doctor sends it; RFC 3339 also read). */
  as_of?: number | string | null
}

export interface Doctor {
  status: 'healthy' | 'degraded' | 'unhealthy'
  score: number
  evaluated_at: string
  top_issues: Finding[]
  metrics_summary: Record<string, unknown> & { findings?: Record<Severity, number>; rules_evaluated?: number }
}

/** What every tab's page is given by the database layout. */
export interface PageProps {
  db: Database
  /** The item segment of the route (`queries/<hash>`), when there is one. */
  item?: string
  query: URLSearchParams
  /** Changes the route's query parameters (undefined removes one), keeping the page; `replace` adds no history entry. */
  setQuery(patch: Record<string, string | undefined>, options?: { replace?: boolean }): void
  /** The doctor's answer, loaded once by the layout (its score is in the header). */
  doctor: Loaded<Doctor>
  /** Reloads the database record (after its settings changed). */
  reloadDb(): void
}
