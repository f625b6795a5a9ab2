// explain_plans: plans of the costliest statements, two ways.
// 1. Sampled: every few minutes, EXPLAIN (FORMAT JSON) of the top statements of the connected
//    database by total time. Normalised texts carry $n parameters: each is PREPAREd and explained with
//    EXPLAIN EXECUTE and NULLs under plan_cache_mode = force_generic_plan (a generic plan, as
//    GENERIC_PLAN gives on 16+). Always read-only, under a short statement_timeout and lock_timeout,
//    and never executed (no ANALYZE).
// 2. auto_explain: JSON plans that auto_explain wrote to the server log, read from pg_log_dir.
// Statements the agent's role may not read (no pg_read_all_data) are a warning logged once per set of
// statements and a note in the collector's health status, not a silent debug line.
// Writes (INSERT, UPDATE, DELETE, MERGE) are explained like reads: PREPARE, then EXPLAIN EXECUTE without
// ANALYZE in a READ ONLY transaction, so they are planned and never run (no ANALYZE is ever issued, for
// any statement: there is no setting for it). EXPLAIN checks the write privilege on the statement's
// table although nothing runs, and the README's read-only role has none: those statements are left
// unexplained, with an info note (ctx.infos: level 'info', shown on the statements page, not a warning
// on every page) saying which grant would explain them; with the grant they are explained.
// Planning runs code with the rights of the role that plans, the agent's: functions (IMMUTABLE ones with
// constant arguments, STABLE ones to estimate selectivity), and through them whatever a view, a row
// security policy, an index expression, a domain or a type's input function of the statement calls,
// including the built-ins that run any query (query_to_xml, table_to_xml). So that no database user can
// make the agent run their code, four things must hold for a statement to be planned:
// - no role the agent does not trust owns, may create in, or has relations or types in a schema on the
//   agent's search_path: names only the planning resolves (in a trusted function's body) go through it;
// - a role the agent trusts ran it, at top level (superusers, the agent's own role, the config's
//   explain_trusted_roles; under `dbm local` also the database's owner, and --explain-trusted-role): the text is its author's, and it reaches the planner in more ways than a check
//   can list (an array literal's input runs a domain's CHECK, say); a statement inside a function or
//   trigger is recorded under the role running it but with its author's text, and only
//   pg_stat_statements 1.9+ says which ran at top level, so without that nothing is sampled;
// - everything it reads belongs to a trusted role: PREPARE first, which parses and rewrites (expanding
//   views and policies) without running anything, fixes which functions the statement calls and locks
//   every relation it reads; then, inside the same transaction, every relation this session holds a lock
//   on and every parameter type must belong to a trusted role (a locked relation cannot change owner,
//   definition or policies meanwhile);
// - no function, aggregate or operator in the database belongs to an untrusted role (trigger functions and
//   procedures aside, which a query cannot call), checked after the PREPARE, so that one created while
//   the agent waited for a lock is found: it is in the statement.
// Only then EXPLAIN EXECUTE. SET ROLE to the statement's role would not be a boundary: code running
// under it can set the role back to the agent's (set_config('role', ...)), as the session user is still
// the agent's.
// The collector's state (log offsets, the warned set) is copied each run, so a run past its deadline
// leaves the committed one as it was; when plans were last sampled is a `cache:` key, kept even when
// the sampling failed, so a sampling that times out is not retried every cycle.
// plan_hash is computed from the plan's shape (node types, relations, indexes, join and scan
// directions), not its costs, so a changed plan gets a new hash and a re-costed one does not.
import type { ExplainPlan } from '../../../shared/wire.ts'
import type { PostgresContext } from '../types.ts'
import { registerCollector } from '../registry.ts'
import { readAutoExplainPlans } from './auto-explain-log.ts'
import { type PlanNode, planEntry } from './plan-entry.ts'
import { featuresOf, ownStatementsRole } from './query-stats.ts'

/** How often plans are sampled, and how many statements each time. */
export const explainSampling = { intervalMs: 5 * 60_000, statements: 5, statementTimeoutMs: 2_000, lockTimeoutMs: 500 }

export const EXPLAINABLE = /^\s*(\/\*[\s\S]*?\*\/\s*)*(select|with|insert|update|delete)\b/i

/** Highest $n in a normalised statement. */
export function parameterCount(text: string): number {
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
export class UntrustedCodeAppeared extends Error {
  constructor(readonly found: UntrustedCode) {
    super('a function of an untrusted role appeared')
  }
}

/** Thrown when a prepared statement reads relations, or takes parameter types, of roles the agent does not trust. */
export class UntrustedObjects extends Error {
  constructor(readonly objects: { name: string; owner: string }[]) {
    super('the statement reaches objects of untrusted roles')
  }
}

/**
 * What the statement just PREPAREd in this transaction reaches that an untrusted role owns: the relations
 * this session holds a lock on (the statement's tables, its views and what they read, taken by the
 * PREPARE and kept to the end of the transaction) and the types of its parameters (a domain's CHECK runs
 * when EXECUTE coerces a NULL to it).
 */
async function untrustedObjects(
  sql: PostgresContext['sql'],
  trusted: readonly string[],
): Promise<{ name: string; owner: string }[]> {
  const roles = sql.array([...trusted])
  const rows = await sql`
    SELECT c.oid::regclass::text AS name, r.rolname::text AS owner
    FROM (SELECT DISTINCT relation FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'relation') l
    JOIN pg_class c ON c.oid = l.relation JOIN pg_roles r ON r.oid = c.relowner
    WHERE NOT r.rolsuper AND r.rolname <> current_user AND r.rolname <> ALL(${roles}::text[])
    UNION ALL
    SELECT t.oid::regtype::text, r.rolname::text
    FROM pg_prepared_statements ps CROSS JOIN LATERAL unnest(ps.parameter_types) AS p(type)
    JOIN pg_type t ON t.oid = p.type JOIN pg_roles r ON r.oid = t.typowner
    WHERE ps.name = 'dbm_explain' AND NOT r.rolsuper AND r.rolname <> current_user AND r.rolname <> ALL(${roles}::text[])
    ORDER BY 2, 1
    LIMIT 5`
  return rows.map((r) => ({ name: cut(String(r.name)), owner: cut(String(r.owner), 63) }))
}

const cut = (s: string, max = 120) => (s.length > max ? `${s.slice(0, max)}…` : s)

/**
 * The functions, in this database, that the planner could run with the agent's rights although the agent
 * does not trust their owner: any function or aggregate (not a procedure, not a trigger function) whose
 * owner is not a superuser, not the agent's own role and not in explain_trusted_roles. Temporary functions
 * of other sessions count too (pg_proc holds them).
 */
export async function untrustedCode(
  sql: PostgresContext['sql'],
  trusted: readonly string[],
): Promise<UntrustedCode | undefined> {
  const rows = await sql`
    WITH untrusted AS (
      SELECT p.oid, quote_ident(n.nspname) || '.' || quote_ident(p.proname) || '(' || pg_get_function_identity_arguments(p.oid) || ')' AS function, r.rolname AS owner
      FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner JOIN pg_namespace n ON n.oid = p.pronamespace
      WHERE p.prokind <> 'p' AND p.prorettype NOT IN ('pg_catalog.trigger'::regtype, 'pg_catalog.event_trigger'::regtype)
        AND NOT r.rolsuper AND r.rolname <> current_user AND r.rolname <> ALL(${sql.array([...trusted])}::text[])
      UNION ALL
      -- An operator of an untrusted role can take over a trusted statement's operator (an exact match in a
      -- schema on the search_path wins) even when its function is a built-in.
      SELECT o.oid, 'operator ' || o.oid::regoperator::text, r.rolname
      FROM pg_operator o JOIN pg_roles r ON r.oid = o.oprowner
      WHERE NOT r.rolsuper AND r.rolname <> current_user AND r.rolname <> ALL(${sql.array([...trusted])}::text[]))
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

/**
 * The schemas on the agent's search_path (pg_catalog and its own temporary schema aside) that a role it
 * does not trust owns, may create objects in (PUBLIC included, as on PostgreSQL 14 and older for
 * `public`), or has a table, view or type in. There such a role's object could stand under a name that a
 * trusted statement, or the body of a trusted function, resolves only when the agent plans it (after the
 * checks, and without the PREPARE locking it). Functions and operators are checked database-wide.
 */
export async function writableSearchPath(sql: PostgresContext['sql'], trusted: readonly string[]): Promise<string[]> {
  const roles = sql.array([...trusted])
  // pg_database_owner (14+; owner of `public` from 15) stands for the database's owner: trusted as it is.
  const rows = await sql`
    WITH trusted AS (
      SELECT r.oid FROM pg_roles r WHERE r.rolsuper OR r.rolname = current_user OR r.rolname = ANY(${roles}::text[])
      UNION
      SELECT r.oid FROM pg_roles r, pg_database d JOIN pg_roles o ON o.oid = d.datdba
      WHERE r.rolname = 'pg_database_owner' AND d.datname = current_database()
        AND (o.rolsuper OR o.rolname = current_user OR o.rolname = ANY(${roles}::text[])))
    SELECT DISTINCT n.nspname::text AS schema
    FROM unnest(current_schemas(false)) AS p(name)
    JOIN pg_namespace n ON n.nspname = p.name
    WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.oid <> pg_my_temp_schema()
      AND (n.nspowner NOT IN (SELECT oid FROM trusted)
        OR EXISTS (SELECT 1 FROM pg_class c WHERE c.relnamespace = n.oid AND c.relowner NOT IN (SELECT oid FROM trusted))
        OR EXISTS (SELECT 1 FROM pg_type t WHERE t.typnamespace = n.oid AND t.typowner NOT IN (SELECT oid FROM trusted))
        OR EXISTS (
          SELECT 1 FROM aclexplode(COALESCE(n.nspacl, acldefault('n', n.nspowner))) a
          WHERE a.privilege_type = 'CREATE' AND (a.grantee = 0 OR a.grantee NOT IN (SELECT oid FROM trusted))))
    ORDER BY 1`
  return rows.map((r) => cut(String(r.schema), 63))
}

/** What to do about writable schemas on the search_path, for notes, warnings and --check. */
export function writableAdvice(schemas: string[]): string {
  const list = schemas.join(', ')
  return (
    `roles the agent does not trust own objects in, or may create them in, ${schemas.length === 1 ? 'schema' : 'schemas'} ${list} on its search_path, where they could stand in for ` +
    `the names statements and functions use while the agent plans them. Revoke CREATE (REVOKE CREATE ON SCHEMA ${schemas[0]} FROM PUBLIC, the default since PostgreSQL 15) ` +
    'and move their objects out, or give the agent role a search_path of schemas only trusted roles write (ALTER ROLE <agent role> SET search_path = ...)'
  )
}

/**
 * Why plans are not sampled from a pg_stat_statements older than 1.9 (PostgreSQL 13), for notes and
 * --check; `local`: for `dbm local`, which reads no auto_explain log.
 */
export function noToplevelAdvice(local = false): string {
  return (
    'this pg_stat_statements (before 1.9, PostgreSQL 13) does not say which statements ran at top level, and a statement run inside a function or trigger ' +
    `is recorded under the role running it with its author's text; update the extension (PostgreSQL 14+)${local ? '' : ', or use auto_explain with pg_log_dir'}`
  )
}

/** The agent's; kept for its readers. */
export const NO_TOPLEVEL = noToplevelAdvice()

/**
 * The sentence that says how to trust `roles` for `database` (`whom` names them when there are several):
 * the agent config's key, or under `dbm local` (`local`), which has no config file, its flag.
 */
export function trustLine(roles: string[], database: string, whom: string, local = false): string {
  if (local)
    return `If you trust ${roles.length === 1 ? roles[0] : whom}, run dbm local with ${roles.map((r) => `--explain-trusted-role ${shellWord(r)}`).join(' ')}`
  return `If you trust ${roles.length === 1 ? roles[0] : whom}, add to database ${JSON.stringify(database)} in the agent config: explain_trusted_roles: ${JSON.stringify(roles)}`
}

/** A role name as one shell word: as it is when plain, else in single quotes (a role name is the database's text). */
function shellWord(name: string): string {
  return /^[A-Za-z0-9_.@-]+$/.test(name)
    ? name
    : `'${name.replaceAll("'", "'\\''").replace(/[\u0000-\u001f\u007f]/g, '?')}'`
}

/** What to do about untrusted functions, for notes, warnings and --check (`local`: under `dbm local`). */
export function untrustedAdvice(found: UntrustedCode, database: string, local = false): string {
  const others = found.count - found.examples.length
  const named = `${found.examples.join(', ')}${others > 0 ? ` and ${others} more function${others === 1 ? '' : 's'}` : ''}`
  return `${named} would run with the agent's rights while planning. ${trustLine(found.owners, database, 'their owners', local)}${local ? '' : '; otherwise use auto_explain with pg_log_dir'}`
}

/**
 * `dbm agent --check`'s note on untrusted functions, leading with what to set: the config key and its
 * value (under `dbm local`, the flags), for whom and where, then why plans are not sampled without it.
 * No `;` of its own: on the check line, `;` separates the notes.
 */
export function untrustedCheckNote(found: UntrustedCode, database: string, local = false): string {
  const others = found.count - found.examples.length
  const named = `${found.examples.join(', ')}${others > 0 ? ` and ${others} more function${others === 1 ? '' : 's'}` : ''}`
  const whom = found.owners.length === 1 ? found.owners[0] : 'their owners'
  const set = local
    ? `${found.owners.map((r) => `--explain-trusted-role ${shellWord(r)}`).join(' ')} (run dbm local with it if you trust ${whom})`
    : `explain_trusted_roles: ${JSON.stringify(found.owners)} (add it to database ${JSON.stringify(database)} in the agent config if you trust ${whom}, or use auto_explain with pg_log_dir)`
  return `${set}: plans will not be sampled while ${named} would run with the agent's rights while planning`
}

/**
 * The roles trusted for EXPLAIN besides superusers and the agent's own: `configured`, and with
 * `trustsOwner` (dbm local) the connected database's owner, looked up each time (ALTER DATABASE ... OWNER).
 */
export async function trustedRoles(
  sql: PostgresContext['sql'],
  configured: readonly string[],
  trustsOwner = false,
): Promise<string[]> {
  if (!trustsOwner) return [...configured]
  const [row] =
    await sql`SELECT pg_get_userbyid(datdba)::text AS owner FROM pg_database WHERE datname = current_database()`
  const owner = row?.owner as string | undefined
  return owner === undefined || configured.includes(owner) ? [...configured] : [...configured, owner]
}

/**
 * EXPLAIN (FORMAT JSON) of `text` under the checks above, in a read-only transaction. Without `values`, a
 * generic plan with NULLs; with them (the dashboard's Explain, src/agent/actions.ts), a custom plan with
 * each value bound as a constant of its parameter's type (quoted by PostgreSQL's quote_nullable).
 */
export async function explainOne(
  ctx: Pick<PostgresContext, 'sql'>,
  text: string,
  trusted: readonly string[],
  values?: readonly (string | null)[],
  /** The statement and lock timeouts of its transaction (default: the sampler's, explainSampling). */
  timeouts: { statementMs: number; lockMs: number } = {
    statementMs: explainSampling.statementTimeoutMs,
    lockMs: explainSampling.lockTimeoutMs,
  },
): Promise<{ Plan: PlanNode } | undefined> {
  const params = parameterCount(text)
  const literals = values
    ? (
        await ctx.sql`SELECT quote_nullable(v) AS v FROM unnest(${ctx.sql.array(values.slice(0, params) as string[])}::text[]) WITH ORDINALITY AS p(v, n) ORDER BY n`
      ).map((r) => String(r.v))
    : Array(params).fill('NULL')
  while (literals.length < params) literals.push('NULL')
  return ctx.sql.begin(async (tx) => {
    await tx.unsafe('SET TRANSACTION READ ONLY')
    await tx.unsafe(`SET LOCAL statement_timeout = ${Math.trunc(timeouts.statementMs)}`)
    // A statement whose table someone holds locked is skipped rather than waited for.
    await tx.unsafe(`SET LOCAL lock_timeout = ${Math.trunc(timeouts.lockMs)}`)
    await tx.unsafe(`SET LOCAL plan_cache_mode = ${values ? 'force_custom_plan' : 'force_generic_plan'}`)
    // A prepared statement outlives the transaction that made it (PREPARE is not undone by a rollback):
    // one left by a run that was cut off goes first.
    if ((await tx`SELECT 1 FROM pg_prepared_statements WHERE name = 'dbm_explain'`).length > 0)
      await tx.unsafe('DEALLOCATE dbm_explain')
    // Parse and rewrite only: nothing runs yet, the functions the statement calls are fixed, and every
    // relation it reads is locked until the end of this transaction.
    await tx.unsafe(`PREPARE dbm_explain AS ${text}`)
    try {
      // In a savepoint, so that after a failure the transaction can still DEALLOCATE.
      return (await tx.savepoint(async (sp) => {
        const objects = await untrustedObjects(sp as unknown as PostgresContext['sql'], trusted)
        if (objects.length > 0) throw new UntrustedObjects(objects)
        const found = await untrustedCode(sp as unknown as PostgresContext['sql'], trusted)
        if (found) throw new UntrustedCodeAppeared(found)
        const rows = await sp.unsafe(
          `EXPLAIN (FORMAT JSON) EXECUTE dbm_explain${params > 0 ? `(${literals.join(', ')})` : ''}`,
        )
        return (rows[0]?.['QUERY PLAN'] as { Plan: PlanNode }[] | undefined)?.[0]
      })) as { Plan: PlanNode } | undefined
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

/** By SQLSTATE only: a message that merely says "permission denied" may be anyone's text. */
const isPermissionDenied = (e: unknown) => (e as { code?: string }).code === '42501'

/** A statement that writes: EXPLAIN of it (never run) still needs the write privilege on its table. */
const WRITES = /^\s*(?:\/\*[\s\S]*?\*\/\s*)*(?:WITH\b[\s\S]*?\)\s*)?(INSERT|UPDATE|DELETE|MERGE)\b/i

/** What the agent's role lacks to explain the refused statement (`cause`: PostgreSQL's error message). */
export function grantHint(major: number, text: string, cause = ''): string {
  const object =
    /permission denied for (function|procedure|schema|type|language|large object|foreign table|foreign server)\b/i
      .exec(cause)?.[1]
      ?.toLowerCase()
  // No grant proposed: EXECUTE would let the monitoring role run it (pg_stat_statements_reset() wipes the
  // statistics dbm reads), and a plan is not worth that.
  if (object === 'function' || object === 'procedure')
    return `it calls a ${object} the agent role may not run; it stays unexplained (do not grant EXECUTE for this: the monitoring role could then run it)`
  if (object === 'schema') return 'grant USAGE on that schema to the agent role'
  if (object === 'foreign table' || object === 'foreign server')
    return 'EXPLAIN of a foreign table needs a user mapping for the agent role; leave it unexplained'
  if (object) return `grant USAGE on that ${object} to the agent role`
  const write = WRITES.exec(text)?.[1]?.toUpperCase()
  if (write)
    return `EXPLAIN of an ${write} needs the ${write} privilege on its table even though it is never run; leave it unexplained or grant it`
  return major >= 14 ? 'grant pg_read_all_data' : 'grant SELECT on the tables'
}

async function sample(ctx: PostgresContext, state: State): Promise<ExplainPlan[]> {
  const [extension] = await ctx.sql`SELECT extversion FROM pg_extension WHERE extname = 'pg_stat_statements'`
  if (!extension) return []
  const ownRole = await ownStatementsRole(ctx)
  const trusted = await trustedRoles(ctx.sql, ctx.explainTrustedRoles ?? [], ctx.explainTrustsOwner)
  // A statement run inside a function or trigger (pg_stat_statements.track = all, which a superuser may
  // also set for one session) is recorded under the role running it but with its author's text: only
  // top-level entries say who wrote them, and only pg_stat_statements 1.9+ (PostgreSQL 14+) tells which
  // entries are top-level. Without that, nothing is sampled.
  if (!featuresOf(String(extension.extversion)).info)
    return reportBlocked(ctx, state, `plans not sampled: ${noToplevelAdvice(ctx.local)}`, 'no-toplevel')
  const top = await ctx.sql`
    SELECT s.queryid::text AS query_hash, s.query, r.rolname::text AS runner,
           COALESCE(r.rolsuper OR r.rolname = current_user OR r.rolname = ANY(${ctx.sql.array([...trusted])}::text[]), false) AS trusted
    FROM pg_stat_statements s LEFT JOIN pg_roles r ON r.oid = s.userid
    WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND s.queryid IS NOT NULL
      AND s.userid::text IS DISTINCT FROM ${ownRole}::text AND s.toplevel
    ORDER BY s.total_exec_time DESC
    LIMIT 50`
  const writable = await writableSearchPath(ctx.sql, trusted)
  if (writable.length > 0)
    return reportBlocked(ctx, state, `plans not sampled: ${writableAdvice(writable)}`, `writable:${writable.join(',')}`)
  const before = await untrustedCode(ctx.sql, trusted)
  if (before) return reportUntrusted(ctx, state, before)
  const out: ExplainPlan[] = []
  const denied: Denied[] = []
  const writes: Denied[] = []
  const untrusted: Untrusted[] = []
  const runners = new Map<string, number>()
  let attempted = 0
  for (const row of top) {
    if (out.length >= explainSampling.statements) break
    const text = String(row.query ?? '')
    if (!EXPLAINABLE.test(text) || text.includes(';') || /\bdbm_explain\b/.test(text)) continue
    // Only what a trusted role ran: a statement's text is its author's, and more of the planner's inputs
    // than any check can list (a domain inside an array literal's input, say) come from the text.
    if (!row.trusted) {
      const runner = cut(String(row.runner ?? 'a dropped role'), 63)
      runners.set(runner, (runners.get(runner) ?? 0) + 1)
      continue
    }
    attempted++
    let explained: { Plan: PlanNode } | undefined
    let failure: unknown
    try {
      explained = await explainOne(ctx, text, trusted)
    } catch (e) {
      if (e instanceof UntrustedCodeAppeared) return reportUntrusted(ctx, state, e.found)
      failure = e
    }
    if (explained) out.push(planEntry(row.query_hash, ctx.now, explained, 'sampled'))
    if (failure === undefined) continue
    if (failure instanceof UntrustedObjects) {
      untrusted.push({ hash: row.query_hash, objects: failure.objects })
      continue
    }
    if (isPermissionDenied(failure)) {
      // EXPLAIN of a write needs the write privilege although nothing runs; the read-only role the README
      // sets up never has it, so that is expected, not something to fix: an info note, not a warning.
      if (WRITES.test(text)) {
        ctx.log.debug('write statement not explained: the agent role may not write', {
          database: ctx.name,
          query_hash: row.query_hash,
        })
        writes.push({ hash: row.query_hash, cause: (failure as Error).message, text })
      } else denied.push({ hash: row.query_hash, cause: (failure as Error).message, text })
      continue
    }
    // Temporary tables, another search_path, a dropped object: this statement cannot be explained now.
    ctx.log.debug('statement not explained', {
      database: ctx.name,
      query_hash: row.query_hash,
      cause: (failure as Error).message,
    })
  }
  state.untrustedSet = undefined
  reportSkipped(ctx, state, denied, untrusted, attempted, out.length === 0 ? runners : new Map())
  reportWrites(ctx, writes)
  return out
}

/** The order write kinds are named in. */
const WRITE_KINDS = ['INSERT', 'UPDATE', 'DELETE', 'MERGE']

/**
 * Write statements left unexplained because the agent's role lacks the write privilege: an info note
 * (not a warning: the README's role is read-only on purpose) naming the grant that would explain them.
 */
function reportWrites(ctx: PostgresContext, writes: Denied[]) {
  if (writes.length === 0) {
    ctx.infos?.delete('explain_plans')
    return
  }
  const kinds = WRITE_KINDS.filter((k) => writes.some((w) => WRITES.exec(w.text)?.[1]?.toUpperCase() === k))
  ctx.infos?.set(
    'explain_plans',
    `${writes.length} write ${writes.length === 1 ? 'statement' : 'statements'} (${kinds.join(', ')}) not explained: EXPLAIN of a write needs the write privilege on its table ` +
      `even though it is never run (${cut(writes[0]!.cause, 200)}). To see their plans, grant it to the agent role (GRANT ${kinds.join(', ')} ON <table> TO <agent role>): ` +
      'the agent plans them and never runs them',
  )
}

/** Sampling stopped by untrusted functions: a note each time, a warning when the set changes; no plans. */
function reportUntrusted(ctx: PostgresContext, state: State, found: UntrustedCode): ExplainPlan[] {
  return reportBlocked(
    ctx,
    state,
    `plans not sampled: ${untrustedAdvice(found, ctx.name, ctx.local)}`,
    `${found.count}:${found.examples.join(',')}`,
  )
}

/** A pass stopped before any EXPLAIN: `note` each time, a warning when `set` (what stopped it) changes; no plans. */
function reportBlocked(ctx: PostgresContext, state: State, note: string, set: string): ExplainPlan[] {
  ctx.notes.set('explain_plans', note)
  ctx.infos?.delete('explain_plans')
  state.deniedSet = undefined
  if (state.untrustedSet !== set)
    ctx.log.warn('plans not sampled: code of roles the agent does not trust could run with its rights while planning', {
      database: ctx.name,
      collector: 'explain_plans',
      detail: note,
    })
  state.untrustedSet = set
  return []
}

interface Denied {
  hash: string
  cause: string
  text: string
}

interface Untrusted {
  hash: string
  objects: { name: string; owner: string }[]
}

/**
 * Statements left unexplained, for lack of privileges or because they reach objects of untrusted roles:
 * a note in the health status each sampling, a warning when the set of statements changes.
 */
function reportSkipped(
  ctx: PostgresContext,
  state: State,
  denied: Denied[],
  untrusted: Untrusted[],
  attempted: number,
  runners: Map<string, number>,
) {
  // Statements of untrusted roles are a note only when they left no plan at all: then they are why the
  // plans page stays empty. Alongside plans of trusted roles' statements they are the configuration.
  let runnersNote: string | undefined
  if (runners.size > 0) {
    const skipped = [...runners.values()].reduce((a, b) => a + b, 0)
    const names = [...runners.keys()].sort().slice(0, 5)
    runnersNote =
      `no plans sampled: the ${skipped} costliest statement${skipped === 1 ? ' was' : 's were'} run by ${names.length === 1 ? 'a role' : 'roles'} the agent does not trust (${names.join(', ')}), ` +
      `and it explains only statements of roles it trusts. ${trustLine(names, ctx.name, 'them', ctx.local)}`
  }
  let untrustedNote: string | undefined
  if (untrusted.length > 0) {
    const objects = new Map<string, string>()
    for (const u of untrusted) for (const o of u.objects) if (objects.size < 3) objects.set(o.name, o.owner)
    const owners = [...new Set(untrusted.flatMap((u) => u.objects.map((o) => o.owner)))].sort().slice(0, 5)
    const named = [...objects].map(([name, owner]) => `${name} (owned by ${owner})`).join(', ')
    untrustedNote =
      `${untrusted.length} of ${attempted} statements not explained: they reach ${named}, whose code would run with the agent's rights while planning. ` +
      trustLine(owners, ctx.name, 'their owners', ctx.local)
  }
  const deniedNote =
    denied.length > 0
      ? `${denied.length} of ${attempted} statements not explained: ${denied[0]!.cause} (${grantHint(ctx.major, denied[0]!.text, denied[0]!.cause)})`
      : undefined
  const parts = [runnersNote, untrustedNote, deniedNote].filter((p): p is string => p !== undefined)
  if (parts.length === 0) {
    ctx.notes.delete('explain_plans')
    state.deniedSet = undefined
    return
  }
  ctx.notes.set('explain_plans', parts.join('; '))
  const set = [
    ...denied.map((d) => `denied:${d.hash}`),
    ...untrusted.map((u) => `untrusted:${u.hash}`),
    ...[...runners.keys()].map((r) => `runner:${r}`),
  ]
    .sort()
    .join(',')
  if (state.deniedSet !== set) {
    if (runnersNote) {
      ctx.log.warn('no plans sampled: the costliest statements were run by roles the agent does not trust', {
        database: ctx.name,
        collector: 'explain_plans',
        detail: runnersNote,
      })
    }
    if (untrustedNote) {
      ctx.log.warn('statements not explained: they reach objects of roles the agent does not trust', {
        database: ctx.name,
        collector: 'explain_plans',
        not_explained: untrusted.length,
        of: attempted,
        detail: untrustedNote,
      })
    }
    if (denied.length > 0) {
      ctx.log.warn('statements not explained: the agent role lacks a privilege they need', {
        database: ctx.name,
        collector: 'explain_plans',
        not_explained: denied.length,
        of: attempted,
        cause: denied[0]!.cause,
        fix:
          WRITES.test(denied[0]!.text) ||
          !/permission denied for (table|relation|view|materialized view|sequence)\b/i.test(denied[0]!.cause)
            ? grantHint(ctx.major, denied[0]!.text, denied[0]!.cause)
            : ctx.major >= 14
              ? 'GRANT pg_read_all_data TO <agent role>'
              : 'GRANT SELECT ON ALL TABLES IN SCHEMA <schema> TO <agent role>',
      })
    }
  }
  state.deniedSet = set
}

export const explainPlans = registerCollector<PostgresContext>({
  name: 'explain_plans',
  engine: 'postgres',
  defaultEnabled: true,

  async collect(ctx) {
    const previous = ctx.state.get('explain_plans') as State | undefined
    const state: State = { ...previous, logOffsets: new Map(previous?.logOffsets) }
    ctx.state.set('explain_plans', state)
    const plans: ExplainPlan[] = []
    const sampledAt = ctx.state.get(SAMPLED_AT) as number | undefined
    if (
      ctx.settings.collectExplainPlans &&
      (sampledAt === undefined || ctx.now - sampledAt >= explainSampling.intervalMs)
    ) {
      ctx.state.set(SAMPLED_AT, ctx.now)
      plans.push(...(await sample(ctx, state)))
    } else if (!ctx.settings.collectExplainPlans) {
      // Sampling turned off (collect_explain_plans): what the last sampling left unexplained no longer applies.
      ctx.notes.delete('explain_plans')
      ctx.infos?.delete('explain_plans')
    }
    if (ctx.pgLogDir) plans.push(...(await readAutoExplainPlans(ctx.pgLogDir, state.logOffsets, ctx.now, ctx.log)))
    return plans.length > 0 ? { explain_plans: plans.slice(0, 200) } : {}
  },
})
