// The types the per-database pages share: the database, the doctor's answer and a page's props. The
// API's answers are typed from their response schemas (src/shared/api), imported as types only so
// that no schema code reaches the bundle.
import type { Static } from '@sinclair/typebox'
import type { Loaded } from '../../components/ui.tsx'
import type { Database as DatabaseSchema, Engine as EngineSchema } from '../../../shared/api/databases.ts'
import type { ActiveSession } from '../../../shared/api/objects.ts'
import type { Severity as SeveritySchema } from '../../../shared/api/common.ts'
import type {
  Doctor as DoctorSchema,
  Finding as FindingSchema,
  FindingGroup as FindingGroupSchema,
} from '../../../shared/api/doctor.ts'

export type Engine = Static<typeof EngineSchema>
export type Severity = Static<typeof SeveritySchema>

/** A registered database as the API sends it (src/shared/api/databases.ts). */
export type Database = Static<typeof DatabaseSchema>

export type Finding = Static<typeof FindingSchema>

export type Doctor = Static<typeof DoctorSchema>
export type FindingGroup = Static<typeof FindingGroupSchema>

/** One session of the Active page's list (its kill panel takes one too). */
export type Session = Static<typeof ActiveSession>

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
