// `dbm agent --check`: validates the config, asks the API whether it takes the key, connects to every
// database once and prints one line per database (engine, server version, the collectors that will
// run, why the others will not, and notes on what the agent's role lacks). Each database's check runs
// under a hard deadline, and its client is destroyed when that passes. Succeeds only when the API took
// the key and every database answered.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import postgres from 'postgres'
import type { AgentConfig, DatabaseConfig } from './config.ts'
import { allowedActions } from './actions.ts'
import {
  noToplevelAdvice,
  trustedRoles,
  untrustedCheckNote,
  untrustedCode,
  writableAdvice,
  writableSearchPath,
} from './collectors/postgres/explain-plans.ts'
import { featuresOf } from './collectors/postgres/query-stats.ts'
import {
  type CustomQuery,
  clickhouseCustomQuery,
  customLabel,
  customSamples,
  postgresCustomQuery,
} from './collectors/custom-metrics.ts'
import { postgresConnection } from './postgres-dsn.ts'
import { dsnEndpoint, planCollectors } from './postgres-runner.ts'
import { othersMayWrite } from './own-file.ts'
import { type CollectorPlan, defaultTimings, withDeadline } from './runner.ts'
import { redactSecrets } from '../shared/redact.ts'
import { pgIdent } from '../shared/sql-text.ts'
import { VERSION } from '../version.ts'

export interface CheckLine {
  ok: boolean
  line: string
}

/** GET /api/v1/auth/me with the key: reachable, and the key accepted. */
export async function checkApi(config: AgentConfig, timeoutS = 10): Promise<CheckLine> {
  const { key } = config.api
  const endpoint = redactSecrets(config.api.endpoint)
  let res: Response
  try {
    res = await fetch(`${config.api.endpoint}/api/v1/auth/me`, {
      headers: { 'x-api-key': key, 'user-agent': `dbm-agent/${VERSION}` },
      signal: AbortSignal.timeout(timeoutS * 1000),
    })
  } catch (e) {
    const reason = (e as Error).name === 'TimeoutError' ? `no answer within ${timeoutS} s` : (e as Error).message
    return { ok: false, line: `FAIL  api: ${endpoint} unreachable: ${reason}` }
  }
  const text = await res.text().catch(() => '')
  let error = text.slice(0, 200)
  try {
    error = (JSON.parse(text) as { error?: string }).error ?? error
  } catch {}
  if (res.ok) {
    // A key the server knows may still lack the scope of the agent's one call: an older server sends no scopes.
    let scopes: unknown
    try {
      scopes = (JSON.parse(text) as { api_key?: { scopes?: unknown } | null }).api_key?.scopes
    } catch {}
    if (Array.isArray(scopes) && !scopes.includes('ingest')) {
      return {
        ok: false,
        line: `FAIL  api: ${endpoint} knows the key, but it lacks the 'ingest' scope the agent's batches need (it has: ${scopes.join(', ') || 'none'}); create one with ingest`,
      }
    }
    return { ok: true, line: `ok    api: ${endpoint} accepts the key` }
  }
  if (res.status === 401 || res.status === 403)
    return { ok: false, line: `FAIL  api: ${endpoint} refused the API key (HTTP ${res.status}: ${error})` }
  return { ok: false, line: `FAIL  api: ${endpoint} answered HTTP ${res.status}: ${error}` }
}

/**
 * What the agent's role lacks, as notes for the check line. `configured`: the trusted roles of the config
 * (or dbm local's flags), undefined when plans are not sampled; `db.explainTrustsOwner` adds the owner.
 */
async function postgresNotes(
  sql: postgres.Sql,
  major: number,
  db: DatabaseConfig,
  configured: readonly string[] | undefined,
): Promise<string[]> {
  const database = db.name
  const local = db.local === true
  const trusted = configured && (await trustedRoles(sql, configured, db.explainTrustsOwner))
  const [p] = await sql`
    SELECT current_user AS role,
           r.rolsuper AS superuser,
           pg_has_role(current_user, 'pg_monitor', 'USAGE') AS monitor,
           pg_has_role(current_user, 'pg_signal_backend', 'USAGE') AS signal,
           (SELECT pg_has_role(current_user, x.oid, 'USAGE') FROM pg_roles x WHERE x.rolname = 'pg_read_all_data') AS read_all,
           (SELECT count(*)::int FROM pg_stat_user_tables t WHERE NOT has_table_privilege(t.relid, 'SELECT')) AS unreadable_tables,
           (SELECT extversion FROM pg_extension WHERE extname = 'pg_stat_statements') AS statements
    FROM pg_roles r WHERE r.rolname = current_user`
  const notes: string[] = []
  if (!p!.statements) {
    notes.push(
      'pg_stat_statements is not installed in this database: query_stats will be empty (CREATE EXTENSION pg_stat_statements; with pg_stat_statements in shared_preload_libraries)',
    )
  }
  if (trusted && p!.statements && !featuresOf(String(p!.statements)).info)
    notes.push(`plans will not be sampled: ${noToplevelAdvice(local)}`)
  const writable = trusted ? await writableSearchPath(sql, trusted) : []
  if (writable.length > 0) notes.push(`plans will not be sampled: ${writableAdvice(writable)}`)
  const untrusted = trusted && (await untrustedCode(sql, trusted))
  if (untrusted) notes.push(untrustedCheckNote(untrusted, database, local))
  if (configured && configured.length > 0) {
    const known = new Set(
      (
        await sql`SELECT rolname::text AS name FROM pg_roles WHERE rolname = ANY(${sql.array([...configured])}::text[])`
      ).map((r) => String(r.name)),
    )
    const unknown = configured.filter((name) => !known.has(name))
    const key = local ? '--explain-trusted-role' : 'explain_trusted_roles'
    if (unknown.length > 0)
      notes.push(
        `${key} names no role ${unknown.map((n) => JSON.stringify(n)).join(', ')} (role names are case-sensitive)`,
      )
  }
  if (p!.superuser) return notes
  const role = String(p!.role)
  // Cancel and terminate signal the backend as the agent's role: without pg_signal_backend only its own sessions.
  const kills = allowedActions(db).filter((k) => k === 'cancel' || k === 'terminate')
  if (kills.length > 0 && !p!.signal) {
    notes.push(
      `role ${role} may signal only its own sessions: ${kills.join(' and ')} of other roles' sessions from the dashboard will be refused (GRANT pg_signal_backend TO ${pgIdent(role)};)`,
    )
  }
  if (!p!.monitor)
    notes.push(
      `role ${role} is not a member of pg_monitor: other sessions, locks and statistics are hidden (GRANT pg_monitor TO ${role};)`,
    )
  if (!p!.read_all && p!.unreadable_tables > 0) {
    const fix =
      major >= 14
        ? `GRANT pg_read_all_data TO ${role};`
        : `GRANT SELECT ON ALL TABLES IN SCHEMA public TO ${role}; GRANT SELECT ON ALL SEQUENCES IN SCHEMA public TO ${role};`
    notes.push(
      `role ${role} cannot read ${p!.unreadable_tables} tables: their statements are not explained, their sequences not checked and their column statistics not read (${fix})`,
    )
  }
  return notes
}

async function checkPostgres(db: DatabaseConfig, timeoutS: number): Promise<CheckLine> {
  const { url, socket } = postgresConnection(db.dsn)
  const sql = postgres(url, {
    max: 1,
    connect_timeout: timeoutS,
    onnotice: () => {},
    connection: { statement_timeout: timeoutS * 1000, application_name: 'dbm-agent-check' },
    ...(socket === undefined ? {} : { host: socket }),
  })
  const { host, port } = dsnEndpoint(db.dsn)
  try {
    // A port that answers but is not PostgreSQL (an HTTP server) never completes the handshake and
    // connect_timeout does not cover it: the whole check has a hard deadline.
    return await withDeadline(
      (async () => {
        const [row] =
          await sql`SELECT current_setting('server_version_num')::int AS num, current_setting('server_version') AS version`
        const major = Math.floor(row!.num / 10_000)
        const plans = planCollectors(db, major)
        // Untrusted functions matter only where plans are sampled (the server may still turn sampling off).
        const explaining = plans.some((p) => p.run && p.collector.name === 'explain_plans')
        const notes = await postgresNotes(sql, major, db, explaining ? (db.explainTrustedRoles ?? []) : undefined)
        // Each collector that would run says what keeps it from working (its own checkNotes / checkPart).
        const check = { sql, db, major, timeoutS }
        let parts = ''
        for (const p of plans) {
          if (!p.run) continue
          if (p.collector.checkNotes) notes.push(...(await p.collector.checkNotes(check)))
          if (p.collector.checkPart) parts += `; ${await p.collector.checkPart(check)}`
        }
        // dbm local has no config file: its line names no allow_actions key to set.
        const allowedBy = db.local ? 'dbm local: your own database' : 'allow_actions'
        const actions = `; actions the dashboard may run: ${allowedActions(db).join(', ') || 'none'} (${allowedBy})`
        const custom = await customLines(db, (m) => postgresCustomQuery(sql, m))
        return {
          ok: custom.ok,
          line:
            okLine(db, `postgres ${row!.version}`, plans) +
            parts +
            actions +
            (notes.length ? `; note: ${notes.join('; ')}` : '') +
            custom.text,
        }
      })(),
      timeoutS * 1000,
      `no PostgreSQL answered at ${host}:${port} within ${timeoutS} s`,
      true,
    )
  } catch (e) {
    return { ok: false, line: `FAIL  ${db.name}: postgres: ${(e as Error).message}` }
  } finally {
    // timeout 0 destroys a connection stuck in its handshake instead of waiting for it.
    await sql.end({ timeout: 0 }).catch(() => {})
  }
}

/** JSON text with bidi controls escaped too, so that a value cannot reorder what the terminal shows. */
const shown = (value: string) =>
  JSON.stringify(value).replace(
    /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  )

/** Rows of a custom metric shown by the check. */
const CHECK_ROWS = 3

/**
 * Each custom metric run once, as the collector runs it: one more line per metric, with its row count and
 * first rows (labels and values quoted, so nothing the database returns can forge a line), or its error.
 */
async function customLines(db: DatabaseConfig, run: CustomQuery): Promise<{ ok: boolean; text: string }> {
  let ok = true
  let text = ''
  for (const metric of db.customMetrics ?? []) {
    let rows
    try {
      rows = await run(metric)
    } catch (e) {
      ok = false
      text += `\nFAIL  ${db.name}: custom metric ${metric.name}: ${shown(customLabel((e as Error).message ?? String(e)))}`
      continue
    }
    const result = customSamples(metric, rows)
    const first = rows
      .slice(0, CHECK_ROWS)
      .map(
        (row) =>
          `{${[...metric.labels, ...metric.values].map((c) => `${c}=${shown(customLabel(row[c]).slice(0, 80))}`).join(', ')}}`,
      )
    const returned = `${rows.length > 1000 ? 'more than 1000' : rows.length} row(s)${first.length ? `, first: ${first.join(' ')}` : ''}`
    if (result.error !== undefined) {
      ok = false
      text += `\nFAIL  ${db.name}: custom metric ${metric.name}: ${shown(result.error)}; ${returned}`
    } else
      text += `\nok    ${db.name}: custom metric ${metric.name} (${metric.kind}, every ${metric.intervalMs / 1000} s): ${returned}`
  }
  return { ok, text }
}

/** `ok    name: engine version; collectors: …; skipped: name (reason), …` */
function okLine(db: DatabaseConfig, server: string, plans: CollectorPlan<unknown>[]): string {
  const running = plans.filter((p) => p.run).map((p) => p.collector.name)
  // custom_metrics without any in the config is not news on every line: the metrics' own lines follow when set.
  const skipped = plans
    .filter((p) => !p.run && !(p.collector.name === 'custom_metrics' && !db.customMetrics?.length))
    .map((p) => `${p.collector.name} (${(p as { reason: string }).reason})`)
  return `ok    ${db.name}: ${server}; collectors: ${running.join(', ')}${skipped.length ? `; skipped: ${skipped.join(', ')}` : ''}`
}

async function checkClickHouse(db: DatabaseConfig, timeoutS: number): Promise<CheckLine> {
  try {
    // Loaded only for ClickHouse entries, like the agent's runner: a PostgreSQL-only agent never loads the HTTP client.
    const { clickhouseOptions, planClickHouseCollectors } = await import('./clickhouse-runner.ts')
    const { connectClickHouse } = await import('./clickhouse-connection.ts')
    const options = clickhouseOptions({ ...defaultTimings, statementTimeoutMs: timeoutS * 1000 })
    const conn = await connectClickHouse(db.dsn, options)
    try {
      const chPlans = planClickHouseCollectors(db, conn.major)
      const plans = chPlans as CollectorPlan<unknown>[]
      // Each collector that would run says what keeps it from working, from the system tables looked up once
      // (querying a missing log table would count an UNKNOWN_TABLE error in system.errors, which log_events reports).
      const { systemTables } = await import('./collectors/clickhouse/system-tables.ts')
      const check = {
        client: conn.client,
        db,
        versionNum: conn.versionNum,
        systemTables: await systemTables({ client: conn.client, now: Date.now(), state: new Map() }),
      }
      const notes: string[] = []
      for (const p of chPlans) if (p.run && p.collector.checkNotes) notes.push(...(await p.collector.checkNotes(check)))
      const custom = await customLines(db, (m) => clickhouseCustomQuery(conn.client, m))
      return {
        ok: custom.ok,
        line:
          okLine(db, `clickhouse ${conn.version}`, plans) +
          (notes.length ? `; note: ${notes.join('; ')}` : '') +
          custom.text,
      }
    } finally {
      await conn.close().catch(() => {})
    }
  } catch (e) {
    return { ok: false, line: `FAIL  ${db.name}: clickhouse: ${(e as Error).message}` }
  }
}

/**
 * The buffer directory: the agent must be able to create files there (the buffer, the saved baselines),
 * and other users must not (they could plant them).
 */
export function checkBufferDir(dir: string): CheckLine {
  const probe = join(dir, `.dbm-check-${process.pid}-${Math.random().toString(36).slice(2)}`)
  try {
    mkdirSync(dir, { recursive: true })
    writeFileSync(probe, '', { mode: 0o600, flag: 'wx' })
    rmSync(probe, { force: true })
  } catch (e) {
    return {
      ok: false,
      line: `FAIL  buffer: ${dir} cannot hold the buffer and the saved baselines: ${(e as Error).message}`,
    }
  }
  if (othersMayWrite(dir))
    return {
      ok: false,
      line: `FAIL  buffer: other users may create files in ${dir}; give the agent a directory of its own (--buffer-dir)`,
    }
  return { ok: true, line: `ok    buffer: ${dir}` }
}

/** One line per database, in config order. */
export async function checkConfig(config: AgentConfig, timeoutS = 10): Promise<CheckLine[]> {
  return Promise.all(
    config.databases.map((db) =>
      db.engine === 'postgres' ? checkPostgres(db, timeoutS) : checkClickHouse(db, timeoutS),
    ),
  )
}
