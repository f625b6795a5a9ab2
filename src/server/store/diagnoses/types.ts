// The store's contract for diagnoses (migration 24): each database's latest diagnosis, kept so that the
// database list, the overview, the doctor, the configuration page and the monitor's alerts read one
// diagnosis, not one each. The store keeps the doctor's part (body) as opaque JSON text: what it holds
// is doctor/current.ts's business. Reads apart from writes.

/** Findings by severity. */
export interface DiagnosisCounts {
  critical: number
  warning: number
  info: number
}

/** A stored diagnosis: what the list reads of it, and the JSON body the pages read. */
export interface StoredDiagnosis {
  database_id: string
  /** The moment it stands for (epoch ms). */
  evaluated_at: number
  /** What it covered (the latest batch, the settings and the thresholds), as its writer spelled it. */
  basis: string
  status: string
  score: number
  findings: DiagnosisCounts
  active_queries: number | null
  /** The rest of the diagnosis as JSON text (findings, groups, failed rules, key figures). */
  body: string
}

/** One database of an organization with its latest diagnosis' summary (null fields: never diagnosed). */
export interface DiagnosisSummaryRow {
  database_id: string
  evaluated_at: number | null
  status: string | null
  score: number | null
  findings: DiagnosisCounts | null
  active_queries: number | null
}

export interface DiagnosisReads {
  /** The database's latest diagnosis with its body, if it has one. */
  latestDiagnosis(databaseId: string): Promise<StoredDiagnosis | undefined>
  /** Every database of the organization with its latest diagnosis' summary, in one query (body not read). */
  diagnosisSummaries(orgId: string): Promise<DiagnosisSummaryRow[]>
}

export interface DiagnosisWrites {
  /**
   * Keeps the diagnosis as the database's latest unless a later one (by evaluated_at) is kept already,
   * or the database is gone; true when kept. Several `serve` processes may write at once: the latest wins.
   */
  recordLatestDiagnosis(diagnosis: StoredDiagnosis): Promise<boolean>
}

export type DiagnosisStore = DiagnosisReads & DiagnosisWrites
