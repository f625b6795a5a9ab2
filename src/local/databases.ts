// The databases of `dbm local`, from the DSNs on its command line: the same AgentConfig the agent reads
// from YAML (src/agent/config.ts), validated by the same parser, with each database named after what its
// DSN points at (host, port and database, never the user or password), so that a later run with the same
// DSN reports to the same registered database and keeps its history. Each PostgreSQL database's owner is
// trusted for EXPLAIN (it is the user's own database), and --explain-trusted-role adds roles; the notes
// name that flag, there being no config file to edit. Its tables are read every cycle (object_stats_interval 0).
import { userInfo } from 'node:os'
import { type AgentConfig, ConfigError, clickhouseTarget, detectEngine, parseAgentConfig } from '../agent/config.ts'
import { postgresHost } from '../agent/postgres-dsn.ts'
import { redactSecrets } from '../shared/redact.ts'
import { UsageError } from '../server/config.ts'

/** A key of the API key's shape, for validating the DSNs before the real key exists. */
const PLACEHOLDER_KEY = `dbm_ak_${'0'.repeat(16)}_${'A'.repeat(43)}`

function decode(part: string): string {
  try {
    return decodeURIComponent(part)
  } catch {
    return part
  }
}

/** `host:port/database` of a DSN the agent's parser accepted. */
export function databaseName(dsn: string, env: Record<string, string | undefined>): string {
  if (detectEngine(dsn) === 'clickhouse') {
    const target = clickhouseTarget(dsn)
    return `${new URL(target.url).host}/${target.database}`
  }
  // As postgres.js reads a DSN: the path's database, else PGDATABASE, else the user's name.
  const url = new URL(dsn)
  const user = decode(url.username) || env.PGUSER || userInfo().username
  const database = decode(url.pathname.replace(/^\//, '')) || url.searchParams.get('dbname') || env.PGDATABASE || user
  return `${postgresHost(dsn)}:${url.port || '5432'}/${database}`
}

/** PostgreSQL's limit on a role name, as the agent config's explain_trusted_roles has it. */
const MAX_ROLE_BYTES = 63

/**
 * The agent's config for `dsns` (its API part filled in once the server is up). A DSN the agent would
 * refuse is a UsageError carrying the agent's own message, about the DSN by its place and without its password.
 * `trustedRoles`: --explain-trusted-role, for every PostgreSQL database (with its owner, always trusted).
 */
export function localAgentConfig(
  dsns: readonly string[],
  env: Record<string, string | undefined>,
  trustedRoles: readonly string[] = [],
): AgentConfig {
  const which = (i: number) => `dbm local: DSN ${i + 1} (${redactSecrets(dsns[i]!)})`
  for (const role of trustedRoles) {
    if (role === '' || Buffer.byteLength(role) > MAX_ROLE_BYTES || role.includes('\0')) {
      throw new UsageError(`dbm local: --explain-trusted-role: expected a role name of 1 to ${MAX_ROLE_BYTES} bytes`)
    }
  }
  const databases = dsns.map((dsn, i) => {
    const engine = detectEngine(dsn)
    if (engine === undefined) {
      throw new UsageError(
        `${which(i)}: expected a postgres://, postgresql://, clickhouse://, tcp://, http:// or https:// URL`,
      )
    }
    if (engine !== 'postgres') return { dsn }
    // A laptop's own database: its tables are read every cycle (object_stats_interval 0), so that a table's
    // findings show within a cycle or two, not at the next minute as an agent's do for a fleet.
    return trustedRoles.length > 0
      ? { dsn, object_stats_interval: '0s', explain_trusted_roles: [...trustedRoles] }
      : { dsn, object_stats_interval: '0s' }
  })
  if (trustedRoles.length > 0 && !databases.some((d) => 'explain_trusted_roles' in d)) {
    throw new UsageError('dbm local: --explain-trusted-role is for PostgreSQL databases, and no DSN names one')
  }
  let config: AgentConfig
  try {
    // JSON is YAML: the config goes through the agent's parser exactly as a config file would.
    config = parseAgentConfig(
      JSON.stringify({ api: { endpoint: 'http://127.0.0.1', key: PLACEHOLDER_KEY }, databases }),
    )
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e
    const m = /^databases\[(\d+)\](?:\.dsn)?:? ?(.*)$/s.exec(e.message)
    throw new UsageError(m ? `${which(Number(m[1]))}: ${m[2]}` : `dbm local: ${e.message}`)
  }
  const seen = new Map<string, number>()
  for (const [i, db] of config.databases.entries()) {
    db.name = databaseName(db.dsn, env)
    db.local = true
    if (db.engine === 'postgres') db.explainTrustsOwner = true
    // The user's own database: the dashboard may cancel, terminate and explain (issue 26).
    if (db.engine === 'postgres') db.allowActions = ['cancel', 'terminate', 'explain']
    const earlier = seen.get(db.name)
    if (earlier !== undefined)
      throw new UsageError(`${which(i)}: names the same database as DSN ${earlier + 1} (${db.name})`)
    seen.set(db.name, i)
  }
  return config
}
