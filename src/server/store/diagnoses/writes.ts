// Writes of the diagnoses table (types.ts): the latest diagnosis of a database, one upsert that keeps the
// later of two diagnoses written at once by several `serve` processes, and nothing for a deleted database.
import type { SqlDriver } from '../driver.ts'
import type { DiagnosisWrites, StoredDiagnosis } from './types.ts'

export function diagnosisWrites(driver: SqlDriver): DiagnosisWrites {
  return {
    async recordLatestDiagnosis(d: StoredDiagnosis): Promise<boolean> {
      const changed = await driver.run(
        `INSERT INTO diagnoses (database_id, evaluated_at, basis, status, score, critical, warning, info, active_queries, body)
         SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10 WHERE EXISTS (SELECT 1 FROM databases WHERE id = $1)
         ON CONFLICT (database_id) DO UPDATE SET evaluated_at = excluded.evaluated_at, basis = excluded.basis, status = excluded.status,
           score = excluded.score, critical = excluded.critical, warning = excluded.warning, info = excluded.info,
           active_queries = excluded.active_queries, body = excluded.body
         WHERE diagnoses.evaluated_at <= excluded.evaluated_at`,
        [
          d.database_id,
          d.evaluated_at,
          d.basis,
          d.status,
          d.score,
          d.findings.critical,
          d.findings.warning,
          d.findings.info,
          d.active_queries,
          d.body,
        ],
      )
      return changed > 0
    },
  }
}
