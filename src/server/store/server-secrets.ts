// Secrets that every `dbm serve` of one store shares, kept in the store's server_secrets table
// (migration 20): the first serve to ask stores its candidate, and every serve (that one included)
// gets what the store holds. Used for the JWT signing secret (src/server/config.ts, serve.ts).
import type { SqlDriver } from './driver.ts'

/** The store's secret `name`, set to `candidate` when it has none yet (or, with `replace`, whatever it had). */
export async function sharedSecret(
  driver: SqlDriver,
  name: string,
  candidate: string,
  now: number,
  replace = false,
): Promise<string> {
  const onConflict = replace ? 'DO UPDATE SET value = excluded.value, created_at = excluded.created_at' : 'DO NOTHING'
  await driver.run(
    `INSERT INTO server_secrets (name, value, created_at) VALUES ($1, $2, $3) ON CONFLICT (name) ${onConflict}`,
    [name, candidate, now],
  )
  const row = await driver.get<{ value: string }>('SELECT value FROM server_secrets WHERE name = $1', [name])
  if (!row) throw new Error(`server secret ${name} missing after it was stored`)
  return String(row.value)
}
