// Reads of the diagnoses table (types.ts): one database's latest diagnosis, and the summaries of an
// organization's databases for the list (by org_id, then each diagnosis by its key; body never read).
import type { SqlDriver } from '../driver.ts'
import type { DiagnosisReads, DiagnosisSummaryRow, StoredDiagnosis } from './types.ts'
import { num, numOrNull } from '../rows.ts'

export function diagnosisReads(driver: SqlDriver): DiagnosisReads {
  return {
    async latestDiagnosis(databaseId: string): Promise<StoredDiagnosis | undefined> {
      const r = await driver.get<Record<string, unknown>>(
        'SELECT database_id, evaluated_at, basis, status, score, critical, warning, info, active_queries, body FROM diagnoses WHERE database_id = $1',
        [databaseId],
      )
      if (!r) return undefined
      return {
        database_id: String(r.database_id),
        evaluated_at: num(r.evaluated_at),
        basis: String(r.basis),
        status: String(r.status),
        score: num(r.score),
        findings: { critical: num(r.critical), warning: num(r.warning), info: num(r.info) },
        active_queries: numOrNull(r.active_queries),
        body: String(r.body),
      }
    },
    async diagnosisSummaries(orgId: string): Promise<DiagnosisSummaryRow[]> {
      const rows = await driver.all<Record<string, unknown>>(
        `SELECT d.id, g.evaluated_at, g.status, g.score, g.critical, g.warning, g.info, g.active_queries
         FROM databases d LEFT JOIN diagnoses g ON g.database_id = d.id WHERE d.org_id = $1 ORDER BY d.name, d.id`,
        [orgId],
      )
      return rows.map((r) => {
        const evaluated = r.evaluated_at !== null && r.evaluated_at !== undefined
        return {
          database_id: String(r.id),
          evaluated_at: evaluated ? num(r.evaluated_at) : null,
          status: evaluated ? String(r.status) : null,
          score: evaluated ? num(r.score) : null,
          findings: evaluated ? { critical: num(r.critical), warning: num(r.warning), info: num(r.info) } : null,
          active_queries: evaluated ? numOrNull(r.active_queries) : null,
        }
      })
    },
  }
}
