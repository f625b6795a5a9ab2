// explain_plans: plans of the costliest statements, two ways.
// 1. Sampled: every few minutes, EXPLAIN (FORMAT JSON) of the top statements of the connected
//    database by total time. Normalised texts carry $n parameters: PostgreSQL 16+ explains them with
//    GENERIC_PLAN; older servers PREPARE the text and EXPLAIN EXECUTE it with NULLs under
//    plan_cache_mode = force_generic_plan. Always read-only, under a short statement_timeout, and
//    never executed (no ANALYZE).
// 2. auto_explain: JSON plans that auto_explain wrote to the server log, read from pg_log_dir.
// Statements the agent's role may not read (no pg_read_all_data) are a warning logged once per set of
// statements and a note in the collector's health status, not a silent debug line.
// The planner runs functions while it plans (IMMUTABLE ones with constant arguments, STABLE ones to
// estimate), with the rights of the role that plans: the agent's. So that no role can make the agent
// run its code, plans are sampled only while no function in the database belongs to a role the agent
// does not trust (superusers, the agent's own role, and the config's explain_trusted_roles), checked in
// the EXPLAIN's own transaction just before it and again after it; when one appears mid-pass the pass's
// plans and errors are thrown away. Trigger functions and procedures are left out: a query cannot call
// them. SET ROLE to the statement's role would not be a boundary: code running under it can set the role
// back to the agent's (set_config('role', ...)), as the session user is still the agent's.
// The collector's state (log offsets, the warned set) is copied each run, so a run past its deadline
// leaves the committed one as it was; when plans were last sampled is a `cache:` key, kept even when
// the sampling failed, so a sampling that times out is not retried every cycle.
// plan_hash is computed from the plan's shape (node types, relations, indexes, join and scan
// directions), not its costs, so a changed plan gets a new hash and a re-costed one does not.
import { createHash } from 'node:crypto'
import type { ExplainPlan } from '../../../shared/wire.ts'
import type { PostgresCollector, PostgresContext } from '../types.ts'
import { readAutoExplainPlans } from './auto-explain-log.ts'
import { ownStatementsRole } from './query-stats.ts'

/** How often plans are sampled, and how many statements each time. */
export const explainSampling = { intervalMs: 5 * 60_000, statements: 5, statementTimeoutMs: 2_000 }

const EXPLAINABLE = /^\s*(\/\*[\s\S]*?\*\/\s*)*(select|with|insert|update|delete)\b/i

interface PlanNode {
  'Node Type'?: string
  'Relation Name'?: string
  'Index Name'?: string
  'Join Type'?: string
  'Scan Direction'?: string
  Strategy?: string
  'Parent Relationship'?: string
  'Total Cost'?: number
  'Plan Rows'?: number
  'Actual Total Time'?: number
  'Actual Rows'?: number
  'Actual Loops'?: number
  Plans?: PlanNode[]
}

function shape(node: PlanNode): unknown {
  return [
    node['Node Type'],
    node['Relation Name'] ?? null,
    node['Index Name'] ?? null,
    node['Join Type'] ?? null,
    node['Scan Direction'] ?? null,
    node.Strategy ?? null,
    node['Parent Relationship'] ?? null,
    (node.Plans ?? []).map(shape),
  ]
}

export function planHash(plan: PlanNode): string {
  return createHash('sha256').update(JSON.stringify(shape(plan))).digest('hex').slice(0, 16)
}

function countNodes(node: PlanNode, types: readonly string[]): number {
  const own = types.includes(node['Node Type'] ?? '') ? 1 : 0
  return own + (node.Plans ?? []).reduce((sum, child) => sum + countNodes(child, types), 0)
}

/** The wire entry for one EXPLAIN result (the top element of EXPLAIN's JSON array). */
export function planEntry(queryHash: string, ts: number, explained: { Plan: PlanNode; 'Execution Time'?: number }, source: ExplainPlan['source']): ExplainPlan {
  const plan = explained.Plan
  const analysed = plan['Actual Total Time'] !== undefined
  return {
    query_hash: queryHash,
    ts,
    plan_json: explained,
    plan_hash: planHash(plan),
    total_cost: plan['Total Cost'] ?? null,
    actual_time_ms: explained['Execution Time'] ?? (analysed ? (plan['Actual Total Time'] ?? 0) : null),
    seq_scans: countNodes(plan, ['Seq Scan']),
    index_scans: countNodes(plan, ['Index Scan', 'Index Only Scan', 'Bitmap Index Scan']),
    rows_estimated: plan['Plan Rows'] ?? null,
    rows_actual: analysed ? (plan['Actual Rows'] ?? 0) * (plan['Actual Loops'] ?? 1) : null,
    source,
  }
}

/** Highest $n in a normalised statement. */
function parameterCount(text: string): number {
  let max = 0
  for (const m of text.matchAll(/\$(\d+)/g)) max = Math.max(max, Number(m[1]))
  return max
}

/** Functions a query could call that belong to roles the agent does not trust: how many, the first few, and their owners. */
export interface UntrustedCode {
  count: number
  /** `schema.name(args) (owned by role)`, each part cut to 120 characters (the database's text, shown in notes and logs). */
  examples: string[]
  /** The owners of those functions (the first 5 by name). */
  owners: string[]
}

/** Thrown when untrusted code appeared between the check before a pass and an EXPLAIN of it. */
class UntrustedCodeAppeared extends Error {
  constructor(readonly found: UntrustedCode) {
    super('a function of an untrusted role appeared')
  }
}

const cut = (s: string, max = 120) => (s.length > max ? `${s.slice(0, max)}…` : s)

/**
 * The functions, in this database, that the planner could run with the agent's rights although the agent
 * does not trust their owner: any function or aggregate (not a procedure, not a trigger function) whose
 * owner is not a superuser, not the agent's own role and not in explain_trusted_roles. Temporary functions
 * of other sessions count too (pg_proc holds them).
 */
export async function untrustedCode(sql: PostgresContext['sql'], trusted: readonly string[]): Promise<UntrustedCode | undefined> {
  const rows = await sql`
    WITH untrusted AS (
      SELECT p.oid, quote_ident(n.nspname) || '.' || quote_ident(p.proname) || '(' || pg_get_function_identity_arguments(p.oid) || ')' AS function, r.rolname AS owner
      FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner JOIN pg_namespace n ON n.oid = p.pronamespace
      WHERE p.prokind <> 'p' AND p.prorettype NOT IN ('pg_catalog.trigger'::regtype, 'pg_catalog.event_trigger'::regtype)
        AND NOT r.rolsuper AND r.rolname <> current_user AND r.rolname <> ALL(${sql.array([...trusted])}::text[]))
    SELECT function, owner,
           (SELECT count(*)::int FROM untrusted) AS total,
           ARRAY(SELECT DISTINCT owner::text FROM untrusted ORDER BY 1 LIMIT 5) AS owners
    FROM untrusted
    ORDER BY owner, oid
    LIMIT 3`
  if (rows.length === 0) return undefined
  return {
    count: rows[0]!.total as number,
    examples: rows.map((r) => `${cut(String(r.function))} (owned by ${cut(String(r.owner), 63)})`),
    owners: (rows[0]!.owners as string[]).map((o) => cut(String(o), 63)),
  }
}

/** What to do about untrusted functions, for notes, warnings and --check. */
export function untrustedAdvice(found: UntrustedCode, database: string): string {
  const others = found.count - found.examples.length
  const named = `${found.examples.join(', ')}${others > 0 ? ` and ${others} more function${others === 1 ? '' : 's'}` : ''}`
  const whom = found.owners.length === 1 ? found.owners[0] : 'their owners'
  return (
    `${named} would run with the agent's rights while planning. If you trust ${whom}, add to database ${JSON.stringify(database)} in the agent config: ` +
    `explain_trusted_roles: ${JSON.stringify(found.owners)}; otherwise use auto_explain with pg_log_dir`
  )
}

async function explainOne(ctx: PostgresContext, text: string): Promise<{ Plan: PlanNode } | undefined> {
  const params = parameterCount(text)
  return ctx.sql.begin(async (tx) => {
    await tx.unsafe('SET TRANSACTION READ ONLY')
    await tx.unsafe(`SET LOCAL statement_timeout = ${explainSampling.statementTimeoutMs}`)
    // Checked again right before the planner runs, in the same transaction: the pass's check may be stale.
    const found = await untrustedCode(tx as unknown as PostgresContext['sql'], ctx.explainTrustedRoles ?? [])
    if (found) throw new UntrustedCodeAppeared(found)
    if (ctx.major >= 16 || params === 0) {
      const rows = await tx.unsafe(`EXPLAIN (${params > 0 ? 'GENERIC_PLAN, ' : ''}FORMAT JSON) ${text}`)
      return (rows[0]?.['QUERY PLAN'] as { Plan: PlanNode }[] | undefined)?.[0]
    }
    await tx.unsafe('SET LOCAL plan_cache_mode = force_generic_plan')
    await tx.unsafe(`PREPARE dbm_explain AS ${text}`)
    try {
      const rows = await tx.unsafe(`EXPLAIN (FORMAT JSON) EXECUTE dbm_explain(${Array(params).fill('NULL').join(', ')})`)
      return (rows[0]?.['QUERY PLAN'] as { Plan: PlanNode }[] | undefined)?.[0]
    } finally {
      await tx.unsafe('DEALLOCATE dbm_explain')
    }
  }) as Promise<{ Plan: PlanNode } | undefined>
}

/** When plans were last sampled (epoch ms): kept at once, not staged (state.ts). */
const SAMPLED_AT = 'cache:explain_plans:sampled_at'

interface State {
  logOffsets: Map<string, number>
  /** The statements refused for lack of privileges at the last sampling, once warned about. */
  deniedSet?: string
  /** The untrusted functions that stopped the last sampling, once warned about. */
  untrustedSet?: string
}

const isPermissionDenied = (e: unknown) => (e as { code?: string }).code === '42501' || /permission denied/i.test((e as Error).message)

/** A statement that writes: EXPLAIN of it (never run) still needs the write privilege on its table. */
const WRITES = /^\s*(?:\/\*[\s\S]*?\*\/\s*)*(?:WITH\b[\s\S]*?\)\s*)?(INSERT|UPDATE|DELETE|MERGE)\b/i

/** What the agent's role lacks to explain the refused statement (`cause`: PostgreSQL's error message). */
export function grantHint(major: number, text: string, cause = ''): string {
  const object = /permission denied for (function|procedure|schema|type|language|large object|foreign table|foreign server)\b/i.exec(cause)?.[1]?.toLowerCase()
  if (object === 'function' || object === 'procedure') return `grant EXECUTE on that ${object} to the agent role, or leave the statement unexplained`
  if (object === 'schema') return 'grant USAGE on that schema to the agent role'
  if (object === 'foreign table' || object === 'foreign server') return 'EXPLAIN of a foreign table needs a user mapping for the agent role; leave it unexplained'
  if (object) return `grant USAGE on that ${object} to the agent role`
  const write = WRITES.exec(text)?.[1]?.toUpperCase()
  if (write) return `EXPLAIN of an ${write} needs the ${write} privilege on its table even though it is never run; leave it unexplained or grant it`
  return major >= 14 ? 'grant pg_read_all_data' : 'grant SELECT on the tables'
}

async function sample(ctx: PostgresContext, state: State): Promise<ExplainPlan[]> {
  const installed = await ctx.sql`SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements'`
  if (installed.length === 0) return []
  const ownRole = await ownStatementsRole(ctx)
  const top = await ctx.sql`
    SELECT queryid::text AS query_hash, query
    FROM pg_stat_statements
    WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND queryid IS NOT NULL
      AND userid::text IS DISTINCT FROM ${ownRole}::text
    ORDER BY total_exec_time DESC
    LIMIT 50`
  const trusted = ctx.explainTrustedRoles ?? []
  const before = await untrustedCode(ctx.sql, trusted)
  if (before) return reportUntrusted(ctx, state, before)
  const out: ExplainPlan[] = []
  const denied: { hash: string; cause: string; text: string }[] = []
  let attempted = 0
  for (const row of top) {
    if (out.length >= explainSampling.statements) break
    const text = String(row.query ?? '')
    if (!EXPLAINABLE.test(text) || text.includes(';') || /\bdbm_explain\b/.test(text)) continue
    attempted++
    let explained: { Plan: PlanNode } | undefined
    let failure: unknown
    try {
      explained = await explainOne(ctx, text)
    } catch (e) {
      if (e instanceof UntrustedCodeAppeared) return reportUntrusted(ctx, state, e.found)
      failure = e
    }
    // A function created just before the EXPLAIN and dropped after it escapes both checks only if it is
    // gone by now; one still there means the planner may have run it: nothing of this pass is kept.
    const after = await untrustedCode(ctx.sql, trusted)
    if (after) return reportUntrusted(ctx, state, after)
    if (explained) out.push(planEntry(row.query_hash, ctx.now, explained, 'sampled'))
    if (failure === undefined) continue
    if (isPermissionDenied(failure)) {
      // EXPLAIN of a write needs the write privilege although nothing runs; the read-only role the README
      // sets up never has it, so that is expected, not something to fix: a debug line, no note.
      if (WRITES.test(text)) ctx.log.debug('write statement not explained: the agent role may not write', { database: ctx.name, query_hash: row.query_hash })
      else denied.push({ hash: row.query_hash, cause: (failure as Error).message, text })
      continue
    }
    // Temporary tables, another search_path, a dropped object: this statement cannot be explained now.
    ctx.log.debug('statement not explained', { database: ctx.name, query_hash: row.query_hash, cause: (failure as Error).message })
  }
  state.untrustedSet = undefined
  reportDenied(ctx, state, denied, attempted)
  return out
}

/** Sampling stopped by untrusted functions: a note each time, a warning when the set changes; no plans. */
function reportUntrusted(ctx: PostgresContext, state: State, found: UntrustedCode): ExplainPlan[] {
  const advice = untrustedAdvice(found, ctx.name)
  ctx.notes.set('explain_plans', `plans not sampled: ${advice}`)
  state.deniedSet = undefined
  const set = `${found.count}:${found.examples.join(',')}`
  if (state.untrustedSet !== set) {
    ctx.log.warn('plans not sampled: functions of roles the agent does not trust could run with its rights while planning', {
      database: ctx.name,
      collector: 'explain_plans',
      untrusted_functions: found.count,
      detail: advice,
    })
  }
  state.untrustedSet = set
  return []
}

/** Privilege failures: a note in the health status each sampling, a warning when the set of statements changes. */
function reportDenied(ctx: PostgresContext, state: State, denied: { hash: string; cause: string; text: string }[], attempted: number) {
  if (denied.length === 0) {
    ctx.notes.delete('explain_plans')
    state.deniedSet = undefined
    return
  }
  const note = `${denied.length} of ${attempted} statements not explained: ${denied[0]!.cause} (${grantHint(ctx.major, denied[0]!.text, denied[0]!.cause)})`
  ctx.notes.set('explain_plans', note)
  const set = denied
    .map((d) => d.hash)
    .sort()
    .join(',')
  if (state.deniedSet !== set) {
    ctx.log.warn('statements not explained: the agent role may not read their tables', {
      database: ctx.name,
      collector: 'explain_plans',
      not_explained: denied.length,
      of: attempted,
      cause: denied[0]!.cause,
      fix:
        WRITES.test(denied[0]!.text) || !/permission denied for (table|relation|view|materialized view|sequence)\b/i.test(denied[0]!.cause)
          ? grantHint(ctx.major, denied[0]!.text, denied[0]!.cause)
          : ctx.major >= 14
          ? 'GRANT pg_read_all_data TO <agent role>'
          : 'GRANT SELECT ON ALL TABLES IN SCHEMA <schema> TO <agent role>',
    })
  }
  state.deniedSet = set
}

export const explainPlans: PostgresCollector = {
  name: 'explain_plans',
  engine: 'postgres',
  defaultEnabled: true,

  async collect(ctx) {
    const previous = ctx.state.get('explain_plans') as State | undefined
    const state: State = { ...previous, logOffsets: new Map(previous?.logOffsets) }
    ctx.state.set('explain_plans', state)
    const plans: ExplainPlan[] = []
    const sampledAt = ctx.state.get(SAMPLED_AT) as number | undefined
    if (ctx.settings.collectExplainPlans && (sampledAt === undefined || ctx.now - sampledAt >= explainSampling.intervalMs)) {
      ctx.state.set(SAMPLED_AT, ctx.now)
      plans.push(...(await sample(ctx, state)))
    }
    if (ctx.pgLogDir) plans.push(...(await readAutoExplainPlans(ctx.pgLogDir, state.logOffsets, ctx.now, ctx.log)))
    return plans.length > 0 ? { explain_plans: plans.slice(0, 200) } : {}
  },
}
