// query_stats: statement statistics from pg_stat_statements for the connected database (each
// configured database reports its own statements), sent as deltas since the previous cycle, summed
// per queryid over users. The first cycle only takes a baseline (or goes on from a saved one).
//
// Resets and evictions: an entry's counters are judged together, and it counts from zero when
// - pg_stat_statements_info.stats_reset moved (a full pg_stat_statements_reset(), extension 1.9+ on 14+);
// - its stats_since moved (it was evicted or reset and created again; extension 1.11+ on 17+);
// - any of its counters went down (the only rule on PostgreSQL 13).
// An entry that appears counts whole. What no rule can see is reported, not guessed: calls an evicted
// entry took after the previous cycle are gone with it, and before 17 an entry evicted and created again
// whose counters passed the old ones is under-counted. Evictions (pg_stat_statements_info.dealloc, and
// entries of the last cycle that are gone) are logged, and shown in the collector's note for an hour.
//
// Counters are read without query texts; texts are fetched only for statements not seen before.
// A missing extension is one clear warning, not an error every cycle. The agent's own statements are
// left out whatever role it connects with: each starts and ends with OWN_MARKER (own-statements.ts),
// and an entry of the agent's role (current_user) whose text does either is the agent's (PostgreSQL 18
// drops the leading comment); another role's entries are never taken for the agent's, whatever their text. That
// includes the entries its EXPLAIN EXECUTE of a prepared statement makes when nested statements are
// tracked, or utilities not (their text is the agent's PREPARE; their queryid is the application's
// statement's only when the application sent parameters, not literals). Which entries those are is learnt once per entry (texts are
// read only for entries not seen before) and they are dropped from every cycle, the first cycle's
// baseline included. With a role of its own (neither superuser nor the database's owner), all of
// that role's entries are left out as well.
import { POSTGRES_STATEMENT_COUNTERS, STATEMENT_FIELDS, pgSelectList } from '../../../shared/families.ts'
import type { QueryStatDelta } from '../../../shared/wire.ts'
import { OWN_MARKER, PREPARED } from '../../own-statements.ts'
import { epoch, num } from '../delta.ts'
import type { PostgresContext } from '../types.ts'
import { registerCollector } from '../registry.ts'
import { maskSecretStatements } from '../../secret-statements.ts'

const MAX_TEXT = 10_000
/** How long the collector's note tells of the latest eviction. */
const EVICTION_NOTE_MS = 60 * 60_000

const COUNTERS = POSTGRES_STATEMENT_COUNTERS
type Counter = (typeof COUNTERS)[number]
type Reading = Record<Counter, number>

/** One entry at one cycle: its stats_since (epoch ms, null before 1.11) and its counters in COUNTERS order. */
type Saved = [since: number | null, ...counters: number[]]

/** What the next cycle needs; a new object every cycle (the runner keeps it only when the run finished in time). */
interface Baseline {
  /** Per (userid, dbid, queryid, toplevel). */
  entries: Map<string, Saved>
  /** pg_stat_statements_info.stats_reset, when the extension has it. */
  statsReset: string | null
  /** pg_stat_statements_info.dealloc, when the extension has it. */
  dealloc: number | null
  /**
   * The counters of each entry, in order (absent from baselines saved before it: COUNTERS of the agent
   * that saved it, which was this one's when the width matches). An agent that reads a counter more than
   * the one that saved the baseline still uses it (readBaseline).
   */
  counters?: string[]
}

interface Evictions {
  /** When the latest eviction was seen. */
  lastAt: number
  /** When the warning was last logged: once an hour while evictions go on. */
  warnedAt: number
  /** Totals since the agent started watching this database. */
  events: number
  gone: number
}

const STATE = 'query_stats'
const TEXTS = 'cache:query_stats:texts'
/**
 * SQL: true when a pg_stat_statements entry is the agent's own: its role is the one the agent connects as
 * and its `query` starts or ends with OWN_MARKER (bound as $2). Another role's entry is never the agent's,
 * whatever its text: an application that ends one statement with the marker must not hide the statement
 * (comments do not change the queryid, so its later calls without the marker go to the same entry).
 */
const IS_OWN =
  '(userid = (SELECT oid FROM pg_roles WHERE rolname = current_user) AND (starts_with(query, $2) OR right(query, length($2)) = $2))'

/** Per entry key: true when it is of the agent's role and its text starts or ends with OWN_MARKER (the agent's own statement). */
const OWN = 'cache:query_stats:own'
const UNAVAILABLE = 'query_stats:unavailable'
const EVICTIONS = 'query_stats:evictions'

/** What the installed extension offers, from its version (an upgraded server may keep an old extension). */
export interface Features {
  /** toplevel and pg_stat_statements_info (1.9). */
  info: boolean
  /** stats_since (1.11); the block time columns were renamed then too. */
  since: boolean
  /** The version as families.ts's PostgreSQL sources of statement counters name it: major × 100 + minor (1.11: 111). */
  level: number
}

export function featuresOf(version: string): Features {
  const [major = 0, minor = 0] = version.split('.').map(Number)
  const at = (m: number, n: number) => major > m || (major === m && minor >= n)
  return { info: at(1, 9), since: at(1, 11), level: major * 100 + minor }
}

async function availability(
  ctx: PostgresContext,
): Promise<{ problem: string } | { features: Features; max: number | null }> {
  const [row] = await ctx.sql`SELECT
      (SELECT extversion FROM pg_extension WHERE extname = 'pg_stat_statements') AS version,
      -- pg_settings leaves the row out for a role without pg_read_all_settings (a laptop's own role, the
      -- database's owner), where current_setting() fails: unknown, and reading pg_stat_statements then says.
      (SELECT setting FROM pg_settings WHERE name = 'shared_preload_libraries') AS preload,
      current_setting('pg_stat_statements.max', true) AS max`
  if (!row?.version) {
    return {
      problem: `pg_stat_statements is not installed in database "${ctx.database}": run CREATE EXTENSION pg_stat_statements; (with pg_stat_statements in shared_preload_libraries)`,
    }
  }
  if (
    row.preload !== null &&
    !String(row.preload)
      .split(',')
      .some((l) => l.trim() === 'pg_stat_statements')
  ) {
    return {
      problem:
        'pg_stat_statements is not in shared_preload_libraries: add it to postgresql.conf and restart PostgreSQL',
    }
  }
  return { features: featuresOf(String(row.version)), max: num(row.max) }
}

/**
 * The oid of the agent's role when its statements are to be left out: a dedicated role, neither
 * superuser nor the owner of the database (the application's role often is). Null otherwise.
 */
export async function ownStatementsRole(ctx: PostgresContext): Promise<string | null> {
  const [row] = await ctx.sql`
    SELECT r.oid::text AS oid, r.rolsuper OR d.datdba = r.oid AS shared
    FROM pg_roles r, pg_database d
    WHERE r.rolname = current_user AND d.datname = current_database()`
  return row && !row.shared ? (row.oid as string) : null
}

/**
 * The keys of `rows` whose statement is the agent's own (IS_OWN: its role's, its text starting or ending with OWN_MARKER). Each entry
 * is judged once, when first seen: its text is read then (entries whose text pg_stat_statements no
 * longer has are judged again at the next cycle). Keys that left pg_stat_statements are forgotten.
 */
async function ownEntries(
  ctx: PostgresContext,
  rows: readonly { key: string; query_hash: string }[],
  toplevel: boolean,
): Promise<Set<string>> {
  const kept = ctx.state.get(OWN)
  const judged = kept instanceof Map ? (kept as Map<string, boolean>) : new Map<string, boolean>()
  const live = new Set<string>()
  const unseen = new Set<string>()
  for (const r of rows) {
    live.add(r.key)
    if (!judged.has(r.key)) unseen.add(r.query_hash)
  }
  if (unseen.size > 0) {
    const texts = await ctx.sql.unsafe(
      `SELECT userid::text || '/' || dbid::text || '/' || queryid::text || '/' || ${toplevel ? 'toplevel::text' : "'t'"} AS key,
              ${IS_OWN} AS own
       FROM pg_stat_statements(true)
       WHERE queryid::text = ANY($1::text[]) AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      [[...unseen], OWN_MARKER],
    )
    for (const t of texts) if (t.own !== null) judged.set(t.key, t.own === true)
  }
  for (const key of judged.keys()) if (!live.has(key)) judged.delete(key)
  ctx.state.set(OWN, judged)
  const out = new Set<string>()
  for (const [key, isOwn] of judged) if (isOwn) out.add(key)
  return out
}

function readingOf(saved: Saved): Reading {
  const out = {} as Reading
  COUNTERS.forEach((c, i) => {
    out[c] = saved[i + 1] as number
  })
  return out
}

/**
 * A kept baseline in this agent's counter order. A counter the saved one lacks (an agent upgraded to read
 * one more) takes the entry's current value, so its first delta is 0 while the others count as always;
 * a counter it has and this agent no longer reads is dropped.
 */
function readBaseline(kept: Baseline, current: Baseline): Baseline {
  const names = kept.counters
  if (!names || (names.length === COUNTERS.length && names.every((c, i) => c === COUNTERS[i]))) return kept
  const at = COUNTERS.map((c) => names.indexOf(c))
  const entries = new Map<string, Saved>()
  for (const [key, saved] of kept.entries) {
    const now = current.entries.get(key)
    entries.set(key, [
      saved[0],
      ...at.map((i, c) => (i >= 0 ? saved[i + 1]! : ((now?.[c + 1] as number | undefined) ?? 0))),
    ])
  }
  return { ...kept, entries, counters: [...COUNTERS] }
}

/** True when `value` is a baseline this collector kept: a saved one could have been damaged or planted. */
function isBaseline(value: unknown): value is Baseline {
  if (value === null || typeof value !== 'object') return false
  const { entries, statsReset, dealloc, counters } = value as Partial<Baseline>
  if (
    !(entries instanceof Map) ||
    !(statsReset === null || typeof statsReset === 'string') ||
    !(dealloc === null || typeof dealloc === 'number')
  )
    return false
  if (
    counters !== undefined &&
    !(
      Array.isArray(counters) &&
      counters.every((c) => typeof c === 'string') &&
      new Set(counters).size === counters.length
    )
  )
    return false
  const width = (counters?.length ?? COUNTERS.length) + 1
  for (const saved of entries.values()) {
    if (!Array.isArray(saved) || saved.length !== width || !(saved[0] === null || typeof saved[0] === 'number'))
      return false
    for (let i = 1; i < width; i++) if (typeof saved[i] !== 'number' || !((saved[i] as number) >= 0)) return false
  }
  return true
}

/** True when the entry was created again since `before`: its stats_since moved, or any counter went down. */
export function startedAnew(before: Saved, now: Saved): boolean {
  if (before[0] !== now[0]) return true
  for (let i = 1; i < now.length; i++) if ((now[i] as number) < (before[i] as number)) return true
  return false
}

/** The entry's counts since `before`, all counters judged together; the whole counts when it started anew. */
export function entryDelta(before: Saved | undefined, now: Saved, allReset: boolean): Reading {
  if (!before || allReset || startedAnew(before, now)) return readingOf(now)
  const out = {} as Reading
  COUNTERS.forEach((c, i) => {
    out[c] = (now[i + 1] as number) - (before[i + 1] as number)
  })
  return out
}

export const queryStats = registerCollector<PostgresContext>({
  name: 'query_stats',
  engine: 'postgres',
  defaultEnabled: true,

  async collect(ctx) {
    const found = await availability(ctx)
    const wasUnavailable = ctx.state.get(UNAVAILABLE) as string | undefined
    if ('problem' in found) {
      if (wasUnavailable !== found.problem)
        ctx.log.warn(found.problem, { database: ctx.name, collector: 'query_stats' })
      ctx.state.set(UNAVAILABLE, found.problem)
      return {}
    }
    if (wasUnavailable) {
      ctx.log.info('pg_stat_statements is available now', { database: ctx.name })
      ctx.state.delete(UNAVAILABLE)
    }
    const { features } = found

    const ownRole = await ownStatementsRole(ctx)
    const readInfo = async () =>
      features.info
        ? ((
            await ctx.sql`SELECT dealloc::float8 AS dealloc, stats_reset::text AS stats_reset FROM pg_stat_statements_info`
          )[0] as { dealloc: unknown; stats_reset: string | null } | undefined)
        : undefined
    const info = await readInfo()
    // The entry's key is put together here rather than in SQL: the text casts and concatenations of
    // 2,000 rows were more than half of this statement's 9 ms (PostgreSQL 17). postgres.js reads oids as
    // numbers and int8 (queryid) as its exact text, so each part is the text PostgreSQL's ::text gives.
    const read = await ctx.sql.unsafe(
      `SELECT userid, dbid, queryid, ${features.info ? 'toplevel' : 'true AS toplevel'},
              ${features.since ? 'stats_since' : 'NULL::timestamptz AS stats_since'},
              ${pgSelectList(STATEMENT_FIELDS, features.level)}
       FROM pg_stat_statements(false)
       WHERE queryid IS NOT NULL AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
         AND userid IS DISTINCT FROM $1::text::oid`,
      [ownRole],
      PREPARED,
    )
    const rows = read.map((r) =>
      Object.assign(r, {
        key: `${r.userid}/${r.dbid}/${r.queryid}/${features.info ? r.toplevel : 't'}`,
        query_hash: String(r.queryid),
      }),
    )
    const own = await ownEntries(ctx, rows as unknown as { key: string; query_hash: string }[], features.info)
    // A full reset while the rows were read leaves some of them from before it and some from after: the
    // sample is not kept, and the next cycle, seeing stats_reset moved, counts every entry from zero.
    if (features.info && (await readInfo())?.stats_reset !== info?.stats_reset) {
      ctx.log.info('pg_stat_statements was reset while it was read; statements are counted at the next cycle', {
        database: ctx.name,
      })
      return {}
    }
    const current: Baseline = {
      entries: new Map(),
      statsReset: info?.stats_reset ?? null,
      dealloc: num(info?.dealloc),
      counters: [...COUNTERS],
    }
    const hashOf = new Map<string, string>()
    for (const r of rows) {
      if (own.has(r.key)) continue
      current.entries.set(r.key, [epoch(r.stats_since), ...COUNTERS.map((c) => num(r[c]) ?? 0)])
      hashOf.set(r.key, r.query_hash)
    }
    const kept = ctx.state.get(STATE)
    const previous = isBaseline(kept) ? readBaseline(kept, current) : undefined
    if (kept !== undefined && !previous)
      ctx.log.warn('the saved statement baseline is not usable; statements start from a new one', {
        database: ctx.name,
      })
    ctx.state.set(STATE, current)
    if (!previous) return {}

    // A full reset moves stats_reset; every entry then counts from zero.
    const allReset =
      current.statsReset !== null && previous.statsReset !== null && current.statsReset !== previous.statsReset
    if (allReset) {
      // A pg_stat_statements_reset() by someone, or a crash that emptied it.
      ctx.log.info(
        'pg_stat_statements was reset: every statement counts from zero; calls between the last cycle and the reset are not counted',
        {
          database: ctx.name,
          stats_reset: current.statsReset,
        },
      )
    }
    const sums = new Map<string, Reading>()
    let recreated = 0
    for (const [key, now] of current.entries) {
      const before = previous.entries.get(key)
      if (before && !allReset && startedAnew(before, now)) recreated++
      const delta = entryDelta(before, now, allReset)
      if (delta.calls === 0) continue
      const hash = hashOf.get(key)!
      const sum = sums.get(hash)
      if (sum) for (const c of COUNTERS) sum[c] += delta[c]
      else sums.set(hash, delta)
    }
    reportEvictions(ctx, previous, current, allReset, recreated, found.max, features)
    if (sums.size === 0) return { query_stats: [] }

    const texts = (ctx.state.get(TEXTS) as Map<string, string> | undefined) ?? new Map<string, string>()
    ctx.state.set(TEXTS, texts)
    const missing = [...sums.keys()].filter((h) => !texts.has(h))
    if (missing.length > 0) {
      const found = await ctx.sql.unsafe(
        // The most-called entry's text, the agent's own texts last: another role running the same statement
        // with a comment of its choosing (comments do not change the queryid) does not name the application's statement.
        `SELECT DISTINCT ON (queryid) queryid::text AS query_hash, left(query, ${MAX_TEXT}) AS query
         FROM pg_stat_statements(true)
         WHERE queryid::text = ANY($1::text[]) AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
         ORDER BY queryid, ${IS_OWN}, calls DESC, userid`,
        [missing, OWN_MARKER],
      )
      for (const t of found) texts.set(t.query_hash, maskSecretStatements(t.query ?? ''))
    }
    // Forget texts of statements that left pg_stat_statements.
    if (texts.size > 2 * current.entries.size + 1000) {
      const live = new Set(hashOf.values())
      for (const h of texts.keys()) if (!live.has(h)) texts.delete(h)
    }

    const out: QueryStatDelta[] = []
    for (const [hash, d] of sums) out.push({ query_hash: hash, query_text: texts.get(hash) ?? '', ...d })
    return { query_stats: out }
  },
})

/**
 * Logs evictions since the previous cycle (dealloc moved, or entries of the last cycle are gone without a
 * full reset) and keeps the collector's note for an hour after the latest one.
 */
function reportEvictions(
  ctx: PostgresContext,
  previous: Baseline,
  current: Baseline,
  allReset: boolean,
  recreated: number,
  max: number | null,
  features: Features,
) {
  const events =
    current.dealloc !== null && previous.dealloc !== null && current.dealloc >= previous.dealloc
      ? current.dealloc - previous.dealloc
      : 0
  let gone = 0
  if (!allReset) for (const key of previous.entries.keys()) if (!current.entries.has(key)) gone++
  const before = ctx.state.get(EVICTIONS) as Evictions | undefined
  // Entries also leave when their statement's objects are dropped or on a partial reset: without
  // dealloc (PostgreSQL 13) only many at once is taken for an eviction.
  const evicted =
    events > 0 || (current.dealloc === null && gone > 0 && max !== null && current.entries.size >= 0.9 * max)
  if (evicted) {
    const warn = !before || !(ctx.now - before.warnedAt < EVICTION_NOTE_MS)
    const totals: Evictions = {
      lastAt: ctx.now,
      warnedAt: warn ? ctx.now : before!.warnedAt,
      events: (before?.events ?? 0) + events,
      gone: (before?.gone ?? 0) + gone + recreated,
    }
    ctx.state.set(EVICTIONS, totals)
    ctx.log[warn ? 'warn' : 'debug'](
      'pg_stat_statements evicted statements since the last cycle: their calls after the last cycle are not counted',
      {
        database: ctx.name,
        collector: 'query_stats',
        evictions: events,
        statements_gone: gone,
        statements_recreated: recreated,
        entries: current.entries.size,
        max: max ?? 'unknown',
      },
    )
  }
  const latest = (ctx.state.get(EVICTIONS) as Evictions | undefined) ?? undefined
  if (latest && ctx.now - latest.lastAt <= EVICTION_NOTE_MS) {
    const precise = features.since
    ctx.notes.set(
      'query_stats',
      `pg_stat_statements evicts statements (pg_stat_statements.max = ${max ?? 'unknown'} for all databases; ${current.entries.size} entries are this database's): ` +
        `${latest.events > 0 ? `${latest.events} evictions, ` : ''}${latest.gone} evicted entries seen since the agent started, the latest at ` +
        `${new Date(latest.lastAt).toISOString()}. Calls an entry took between a cycle and its eviction are not counted` +
        `${precise ? '' : ', and before PostgreSQL 17 a statement evicted and run again within one cycle may be under-counted'}. Raise pg_stat_statements.max.`,
    )
  } else if (latest) {
    ctx.notes.delete('query_stats')
  }
}
