// The API's answers that the per-database pages read, as the README's endpoint sections describe them.
import type { Loaded } from '../../components/ui.tsx'

export type Engine = 'postgres' | 'clickhouse'
export type Severity = 'critical' | 'warning' | 'info'

export interface Database {
  id: string
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
  status: 'connected' | 'disconnected'
  last_seen_at: string | null
  created_at: string
  updated_at: string
}

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
  /** Changes the route's query parameters (undefined removes one), keeping the page. */
  setQuery(patch: Record<string, string | undefined>): void
  /** The doctor's answer, loaded once by the layout (its score is in the header). */
  doctor: Loaded<Doctor>
  /** Reloads the database record (after its settings changed). */
  reloadDb(): void
}
