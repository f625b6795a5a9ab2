// Whether the agent runs on its PostgreSQL server's host, decided from evidence and never assumed:
// the connection is over a Unix socket (inet_server_addr() is null); the server's postmaster.pid, read
// here, names the server's port and start time; its PG_VERSION names its major; or the address the
// server answered on is one of this host's interfaces. A data directory the server names that does not
// exist here outweighs all of them (a socket shared between containers). Also what the host collector
// measures: the data directory, the WAL directory (pg_wal, resolved when it is a symlink), each
// tablespace's location and the log directory.
import { lstat, realpath, stat } from 'node:fs/promises'
import { createSocket } from 'node:dgram'
import { isIPv6 } from 'node:net'
import { isAbsolute, join } from 'node:path'
import type postgres from 'postgres'
import { HOST_CALL_TIMEOUT_MS, readBounded, within } from './proc.ts'
import type { RolePath } from './sample.ts'
import { PREPARED } from '../own-statements.ts'

const FACTS_SQL = `
  SELECT inet_server_addr()::text AS addr,
         current_setting('port') AS port,
         extract(epoch FROM pg_postmaster_start_time())::float8 AS started,
         current_setting('server_version_num')::int / 10000 AS major,
         (SELECT setting FROM pg_settings WHERE name = 'data_directory') AS data_directory,
         (SELECT setting FROM pg_settings WHERE name = 'log_directory') AS log_directory,
         (SELECT setting FROM pg_settings WHERE name = 'logging_collector') AS logging_collector,
         (SELECT coalesce(json_agg(json_build_array(spcname::text, pg_tablespace_location(oid)) ORDER BY spcname), '[]')
            FROM pg_tablespace WHERE spcname NOT IN ('pg_default', 'pg_global')) AS tablespaces`

export interface PostgresHostFacts {
  addr: string | null
  port: string
  started: number
  major: number
  dataDirectory: string | null
  logDirectory: string | null
  loggingCollector: boolean
  tablespaces: [string, string][]
}

export async function postgresHostFacts(sql: postgres.Sql): Promise<PostgresHostFacts> {
  const [r] = await sql.unsafe<Record<string, unknown>[]>(FACTS_SQL, [], PREPARED)
  const text = (v: unknown) => (typeof v === 'string' && v !== '' ? v : null)
  const spaces = typeof r!.tablespaces === 'string' ? JSON.parse(r!.tablespaces) : r!.tablespaces
  return {
    addr: text(r!.addr),
    port: String(r!.port),
    started: Number(r!.started),
    major: Number(r!.major),
    dataDirectory: text(r!.data_directory),
    logDirectory: text(r!.log_directory),
    loggingCollector: r!.logging_collector === 'on',
    tablespaces: Array.isArray(spaces)
      ? (spaces as [string, string][]).filter(([, location]) => typeof location === 'string' && location !== '')
      : [],
  }
}

export type HostVerdict =
  | { onHost: true; evidence: string; paths: RolePath[]; notes: string[] }
  | { onHost: false; reason: string }

const errno = (e: unknown) => (e as { code?: string }).code

/** Whether `path` exists here: true, false (ENOENT), or 'hidden' (a parent we may not search). */
async function exists(path: string): Promise<boolean | 'hidden'> {
  try {
    await within(stat(path), HOST_CALL_TIMEOUT_MS, path)
    return true
  } catch (e) {
    if (errno(e) === 'EACCES') return 'hidden'
    return false
  }
}

/**
 * Whether `addr` is one of this host's addresses: a UDP socket may be bound to it only then
 * (EADDRNOTAVAIL otherwise). Asked of the kernel this way rather than by listing the interfaces, which
 * needs a netlink socket that a service restricted to AF_INET, AF_INET6 and AF_UNIX (the systemd unit's
 * RestrictAddressFamilies) may not open. Nothing is sent; the socket is closed at once.
 */
export function isLocalAddress(addr: string): Promise<boolean> {
  return new Promise((resolve) => {
    let socket: ReturnType<typeof createSocket>
    try {
      socket = createSocket(isIPv6(addr) ? 'udp6' : 'udp4')
    } catch {
      return resolve(false)
    }
    const timer = setTimeout(() => done(false), HOST_CALL_TIMEOUT_MS)
    function done(local: boolean) {
      clearTimeout(timer)
      try {
        socket.close()
      } catch {
        // not bound
      }
      resolve(local)
    }
    socket.once('error', () => done(false))
    try {
      socket.bind({ port: 0, address: addr, exclusive: true }, () => done(true))
    } catch {
      done(false)
    }
  })
}

/** What the data directory's own files say, when the agent may read them. */
async function dataDirectoryEvidence(
  facts: PostgresHostFacts,
  dir: string,
): Promise<{ evidence?: string; unreadable?: string }> {
  try {
    const lines = (await readBounded(join(dir, 'postmaster.pid'), 4096)).split('\n')
    const started = Number(lines[2])
    if (lines[3]?.trim() === facts.port && Number.isFinite(started) && Math.abs(started - facts.started) <= 2) {
      return { evidence: `${dir}/postmaster.pid names the server's port ${facts.port} and start time` }
    }
    return {}
  } catch {
    // No postmaster.pid we may read: PG_VERSION may still tell.
  }
  try {
    const version = (await readBounded(join(dir, 'PG_VERSION'), 64)).trim()
    if (version === String(facts.major))
      return { evidence: `${dir}/PG_VERSION names the server's major ${facts.major}` }
    return {}
  } catch (e) {
    return errno(e) === 'EACCES' ? { unreadable: `the agent may not read inside ${dir}` } : {}
  }
}

/** The paths the host collector measures, with notes on what it could not resolve. */
async function rolePaths(facts: PostgresHostFacts, dir: string, notes: string[]): Promise<RolePath[]> {
  const paths: RolePath[] = [{ role: 'data', path: dir }]
  const wal = join(dir, 'pg_wal')
  try {
    const link = await within(lstat(wal), HOST_CALL_TIMEOUT_MS, wal)
    paths.push({
      role: 'wal',
      path: link.isSymbolicLink() ? await within(realpath(wal), HOST_CALL_TIMEOUT_MS, wal) : wal,
    })
  } catch (e) {
    notes.push(
      errno(e) === 'EACCES'
        ? `the WAL directory is not measured: the agent may not look inside ${dir} (pg_wal may be a link to another filesystem); run the agent as the database's OS user or add it to that user's group`
        : `the WAL directory ${wal} is not measured: ${(e as Error).message}`,
    )
  }
  for (const [name, location] of facts.tablespaces) paths.push({ role: `tablespace:${name}`, path: location })
  if (facts.logDirectory && facts.loggingCollector) {
    const logDir = isAbsolute(facts.logDirectory) ? facts.logDirectory : join(dir, facts.logDirectory)
    if ((await exists(logDir)) === true) paths.push({ role: 'log', path: logDir })
  }
  return paths
}

/** Decides from the server's facts and this host's files and interfaces. */
export async function judgeHost(facts: PostgresHostFacts): Promise<HostVerdict> {
  if (process.platform !== 'linux')
    return {
      onHost: false,
      reason: `host figures are read from /proc and statfs, which ${process.platform} does not have`,
    }
  const dir = facts.dataDirectory
  const evidence: string[] = []
  const notes: string[] = []
  if (facts.addr === null) evidence.push('connected over a Unix socket')
  else if (await isLocalAddress(facts.addr.replace(/\/\d+$/, '')))
    evidence.push(`the server's address ${facts.addr.replace(/\/\d+$/, '')} is one of this host's`)
  if (dir === null) {
    if (evidence.length === 0)
      return {
        onHost: false,
        reason:
          'no evidence that the agent runs on the database host: it connects over TCP to an address of another host, and the role may not read data_directory (GRANT pg_read_all_settings or pg_monitor)',
      }
    notes.push(
      'no filesystem is measured: the role may not read data_directory (GRANT pg_monitor or pg_read_all_settings TO the agent role)',
    )
    return { onHost: true, evidence: evidence.join('; '), paths: [], notes }
  }
  const present = await exists(dir)
  if (present === false) {
    const why = evidence.length > 0 ? ` although ${evidence.join(' and ')}` : ''
    return {
      onHost: false,
      reason: `the server's data directory ${dir} does not exist here${why}: the agent runs on another host or in another container`,
    }
  }
  const own =
    present === true ? await dataDirectoryEvidence(facts, dir) : { unreadable: `the agent may not reach ${dir}` }
  if (own.evidence) evidence.push(own.evidence)
  if (evidence.length === 0) {
    return {
      onHost: false,
      reason: `no evidence that the agent runs on the database host: ${dir} exists here, but ${own.unreadable ?? 'its postmaster.pid and PG_VERSION do not match the server'}, and the connection is over TCP to another host's address`,
    }
  }
  return { onHost: true, evidence: evidence.join('; '), paths: await rolePaths(facts, dir, notes), notes }
}
