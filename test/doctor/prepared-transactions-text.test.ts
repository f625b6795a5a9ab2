// pg_prepared_transactions with hostile gids, owners and databases (the monitored server's text): the
// title and detail quote the gid as a string constant and the names as identifiers, so a gid cannot
// forge the age or the object, and no line break or bidirectional mark reaches them.
import { expect, test } from 'bun:test'
import type { DoctorContext } from '../../src/server/doctor/context.ts'
import { preparedTransactions } from '../../src/server/doctor/rules/postgres/prepared-transactions.ts'

/** The rule's findings for prepared transactions `entries`, each prepared 10 minutes before the snapshot. */
async function findings(entries: { gid: string; owner?: string; database?: string }[]) {
  const ts = Date.UTC(2026, 0, 2, 12)
  const ctx = {
    thresholds: (rule: { thresholds: Record<string, number> }) => rule.thresholds,
    xminHolders: async () => ({
      ts,
      entries: entries.map((e) => ({ kind: 'prepared', prepared_at: ts - 600_000, locks: 2, xmin_age: 10, ...e })),
    }),
  } as unknown as DoctorContext
  return preparedTransactions.check(ctx)
}

test('a hostile gid is one quoted constant in the title and detail; it cannot fake an age, an object or a line', async () => {
  const [forged, hidden] = await findings([
    { gid: 'public.orders" pending for 1 minute\\', owner: 'app', database: 'shop' },
    { gid: 'a\nb\u202Ec\u2028d', owner: 'evil"role', database: 'db\u2028x' },
  ])
  expect(forged!.title).toBe(`Prepared transaction E'public.orders" pending for 1 minute\\\\' pending for 10.0 min`)
  expect(forged!.detail).toStartWith(
    `Prepared transaction E'public.orders" pending for 1 minute\\\\' (owner app in database shop) was prepared 10.0 min ago`,
  )
  expect(hidden!.title).toBe(`Prepared transaction E'a\\nb\\u202Ec\\u2028d' pending for 10.0 min`)
  expect(hidden!.detail).toStartWith(
    `Prepared transaction E'a\\nb\\u202Ec\\u2028d' (owner "evil""role" in database U&"db\\2028x") was prepared`,
  )
  for (const f of [forged!, hidden!])
    expect(`${f.title}${f.detail}`).not.toMatch(/[\n\r\u2028\u2029\u202a-\u202e\u2066-\u2069]/)
  // The object stays the gid itself: the key the xmin horizon's findings name the transaction by.
  expect(forged!.object).toBe('prepared transaction public.orders" pending for 1 minute\\')
})

test('a plain gid reads as a plain string constant', async () => {
  const [f] = await findings([{ gid: 'billing-42', owner: 'app', database: 'shop' }])
  expect(f!.title).toBe("Prepared transaction 'billing-42' pending for 10.0 min")
  expect(f!.how_to_fix[0]).toStartWith("ROLLBACK PREPARED 'billing-42';")
})
