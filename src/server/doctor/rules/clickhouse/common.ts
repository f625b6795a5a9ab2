// What the ClickHouse rules share: a table's name as SQL text and as a finding's object, and numbers
// written the way the findings write them.
import { chString, chTable } from '../../sql-text.ts'

/** `db.table`, each part quoted as ClickHouse needs, for commands. */
export const tableSql = chTable

/** `database = 'db' AND table = 't'`, the filter of the system tables on one table. */
export const tableFilter = (database: string, table: string) =>
  `database = ${chString(database)} AND table = ${chString(table)}`

/** A number with thousands separators. */
export const count = (n: number) => n.toLocaleString('en-US')

/** Query text cut to a length a finding can show. */
export const short = (text: string, max = 300) => (text.length > max ? `${text.slice(0, max)}…` : text)

/** `1 part`, `2,000 parts`. */
export const counted = (n: number, noun: string) => `${count(n)} ${noun}${n === 1 ? '' : 's'}`
