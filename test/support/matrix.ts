// The test matrix and its narrowing for local runs: DBM_TEST_PG (a comma list of PostgreSQL majors) and
// DBM_TEST_STORES (a comma list of store kinds) restrict what the matrix tests loop over. CI runs the
// whole matrix: with CI=true either variable is refused (the run stops saying so), so a narrowed CI run
// cannot pass for a full one.

export const allMajors = [13, 14, 16, 17, 18] as const
export const allStoreKinds = ['sqlite', 'postgres'] as const

export type Major = (typeof allMajors)[number]
export type StoreKind = (typeof allStoreKinds)[number]

/** The values of `name` (a comma list), each one of `allowed`; all of `allowed` when unset. */
export function narrowed<T extends string | number>(
  name: string,
  allowed: readonly T[],
  env: Record<string, string | undefined> = process.env,
): T[] {
  const raw = env[name]?.trim()
  if (!raw) return [...allowed]
  if (env.CI === 'true' || env.CI === '1') {
    throw new Error(`${name} is set, but CI runs the whole matrix: unset ${name} (it narrows local runs only)`)
  }
  const picked: T[] = []
  for (const item of raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const value = allowed.find((a) => String(a) === item)
    if (value === undefined) throw new Error(`${name}: unknown value "${item}" (one of ${allowed.join(', ')})`)
    if (!picked.includes(value)) picked.push(value)
  }
  if (picked.length === 0) throw new Error(`${name} names nothing (one of ${allowed.join(', ')})`)
  return allowed.filter((a) => picked.includes(a))
}

/** The PostgreSQL majors the matrix tests run against. */
export const testedMajors: readonly Major[] = narrowed('DBM_TEST_PG', allMajors)

/** The store kinds the store and API suites run against. */
export const testedStoreKinds: StoreKind[] = narrowed('DBM_TEST_STORES', allStoreKinds)
