// The store's contract for the doctor's thresholds per database (migration 25): an operator's values for
// a rule's thresholds on one database, each kept beside the rule and key it overrides (a number, or a
// list of names such as the superusers an operator means). Which rules and keys exist, and what values
// are sane, is the doctor's business (doctor/thresholds.ts): the store keeps what it is given. Reads
// apart from writes.

/** A threshold's value: a number, or a list of names (role names of an allowlist). */
export type ThresholdValue = number | string[]

/** One overridden threshold of a database. */
export interface StoredThreshold {
  rule: string
  key: string
  value: ThresholdValue
  /** When it was last set (epoch ms). */
  updated_at: number
}

/** A change of one threshold: a value sets it, null takes the override away (back to the rule's default). */
export interface ThresholdChange {
  rule: string
  key: string
  value: ThresholdValue | null
}

export interface ThresholdReads {
  /** The database's overridden thresholds, by rule then key. */
  databaseThresholds(databaseId: string): Promise<StoredThreshold[]>
}

export interface ThresholdWrites {
  /** Applies the changes in one transaction; nothing for a database that is gone. */
  changeThresholds(databaseId: string, changes: readonly ThresholdChange[], now: number): Promise<void>
  /** Takes every override of the database away; answers how many there were. */
  clearThresholds(databaseId: string): Promise<number>
}

export type ThresholdStore = ThresholdReads & ThresholdWrites
