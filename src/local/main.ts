// `dbm local <dsn>…`: one process running `serve` on embedded SQLite in a per-user data directory and
// the agent for the given databases, as production runs them (serve.ts and agent.ts, not copies): the
// agent posts to the serve over loopback HTTP with an API key of the local organization. No signup and
// no mail: the first run creates a verified local organization and user, signup is closed, mail goes to
// the log; a one-time link printed at start signs the browser in. Each DSN is checked at start with the
// messages of `dbm agent --check`; a database that does not answer is reported and retried by the agent.
// SIGINT and SIGTERM stop the agent first (what it collected goes to the serve or its buffer), then the
// serve; a second `dbm local` on the same data directory is refused. Passwords may come from the
// environment or ~/.pgpass rather than the command line, which others can read (passwords.ts); the data
// directory must be the user's own (data-dir.ts), and whatever the process creates is for the user alone
// (umask 077). Nothing another user of the machine can reach gets the session (listen.ts, link-file.ts):
// the links name a random host of this run under .localhost, bound on 127.0.0.1 and ::1; each run first
// ends every session and key of earlier runs (account.ts); the link goes neither on a command line nor
// onto an output others may read. Each PostgreSQL database's owner is trusted for EXPLAIN (the user's own
// database; databases.ts), which the start output says.
import { Agent } from '../agent/agent.ts'
import { checkConfig } from '../agent/check.ts'
import { type ServeConfig, UsageError, parseListen, resolveServeConfig } from '../server/config.ts'
import type { AgentConfig } from '../agent/config.ts'
import { createLogger, type Logger, type LogLevel } from '../shared/log.ts'
import { redactSecrets } from '../shared/redact.ts'
import { VERSION } from '../version.ts'
import { fstatSync } from 'node:fs'
import { agentKey, endEarlierRuns, localUser } from './account.ts'
import { defaultDataDir, prepareDataDir } from './data-dir.ts'
import { localAgentConfig } from './databases.ts'
import { type LinkFile, outputExposure, removeStaleLinkFiles, writeLinkFile } from './link-file.ts'
import { ListenError, hostScreen, listenLoopback, randomHostName } from './listen.ts'
import { lockDataDir } from './lock.ts'
import { openBrowser } from './open-browser.ts'
import { applyPasswords, commandLineWarning } from './passwords.ts'
import { SIGN_IN_LIFETIME_MS, SIGN_IN_PATH, SignInLinks, localSignInRoutes } from './sign-in.ts'

export interface LocalFlags {
  listen?: string
  'data-dir'?: string
  'log-level'?: string
  open?: string
  /** --explain-trusted-role, each time given. */
  'explain-trusted-role'?: string[]
}

/** Loopback names --listen accepts: 127.0.0.0/8, ::1 and localhost (the port is bound on 127.0.0.1 and ::1 whichever is named). */
export function isLoopback(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname)
}

/** The serve's settings: only those of the environment that make sense on one's own machine. */
function serveConfig(flags: LocalFlags, dataDir: string, env: Record<string, string | undefined>): ServeConfig {
  const listen = flags.listen ?? '127.0.0.1:0'
  const { hostname } = parseListen(listen, '--listen')
  if (!isLoopback(hostname))
    throw new UsageError(
      `dbm local: --listen must name a loopback address (127.0.0.1, ::1 or localhost), got "${listen}"`,
    )
  const kept: Record<string, string | undefined> = {
    DBM_SIGNUP: 'closed',
    DBM_LOG_LEVEL: env.DBM_LOG_LEVEL,
    DBM_RETENTION_DAYS: env.DBM_RETENTION_DAYS,
    DBM_JWT_SECRET: env.DBM_JWT_SECRET,
  }
  const flagsOut: Record<string, string> = { listen, 'data-dir': dataDir }
  if (flags['log-level'] !== undefined) flagsOut['log-level'] = flags['log-level']
  // No DBM_SMTP_URL (mail goes to the log), no store URL (SQLite), no proxy.
  // No signups, and the dashboard tells a signed-out visitor to use the link the process prints.
  return { ...resolveServeConfig(flagsOut, kept), signup: 'local' }
}

/** Whom the plan sampler trusts, when a PostgreSQL database is watched: its owner, and the flag's roles. */
export function explainLine(config: AgentConfig, roles: readonly string[]): string | undefined {
  if (!config.databases.some((d) => d.engine === 'postgres')) return undefined
  const others =
    roles.length === 0
      ? '; --explain-trusted-role NAME adds a role'
      : `, and ${roles.map((r) => JSON.stringify(r)).join(', ')} (--explain-trusted-role)`
  return `Plans:     statements of each PostgreSQL database's owner are explained (it is your own database: its code is yours)${others}`
}

/** Runs `f` (which spawns synchronously) under `umask`, when one is given. */
function withUmask(umask: number | undefined, f: () => void): void {
  if (umask === undefined) {
    f()
    return
  }
  const own = process.umask(umask)
  try {
    f()
  } finally {
    process.umask(own)
  }
}

export async function runLocal(
  flags: LocalFlags,
  dsns: readonly string[],
  env: Record<string, string | undefined>,
): Promise<number> {
  if (dsns.length === 0)
    throw new UsageError(
      'dbm local: name at least one database DSN, e.g. dbm local postgres://user@localhost:5432/app, with the password in PGPASSWORD or ~/.pgpass (see dbm local --help)',
    )
  const agentConfig = localAgentConfig(dsns, env, flags['explain-trusted-role'] ?? [])
  const config = serveConfig(flags, flags['data-dir'] ?? defaultDataDir(process.platform, env), env)
  const log = createLogger(config.logLevel as LogLevel)
  const warning = commandLineWarning(dsns)
  if (warning) process.stderr.write(`${warning}\n`)
  for (const line of applyPasswords(agentConfig, env)) process.stderr.write(`${line}\n`)

  // The store, its write-ahead log and lock, the buffers, the secret: every file for the user alone.
  const userUmask = process.platform === 'win32' ? undefined : process.umask(0o077)
  try {
    return await runInDataDir(flags, config, agentConfig, log, userUmask)
  } finally {
    if (userUmask !== undefined) process.umask(userUmask)
  }
}

async function runInDataDir(
  flags: LocalFlags,
  config: ServeConfig,
  agentConfig: AgentConfig,
  log: Logger,
  userUmask: number | undefined,
): Promise<number> {
  let dataDir: string
  try {
    dataDir = prepareDataDir(config.dataDir)
  } catch (e) {
    process.stderr.write(`dbm local: cannot use the data directory ${config.dataDir}: ${(e as Error).message}\n`)
    return 1
  }
  config.dataDir = dataDir
  const lock = lockDataDir(dataDir)
  if ('problem' in lock) {
    process.stderr.write(`dbm local: ${lock.problem}\n`)
    return 1
  }
  if (!('release' in lock)) {
    process.stderr.write(
      `dbm local: another dbm local${lock.holder ? ` (pid ${lock.holder})` : ''} is running on ${dataDir}; stop it first, or give this one another --data-dir\n`,
    )
    return 1
  }

  let agent: Agent | undefined
  let agentStarted: Promise<void> | undefined
  let stopping = false
  let stopServe!: (signal: string) => void
  const stop = new Promise<string>((resolve) => (stopServe = resolve))
  const onSignal = async (signal: string) => {
    if (stopping) return
    stopping = true
    // The agent first: its last batches reach the serve, or its buffer in the data directory.
    await agentStarted?.catch(() => {})
    await agent?.stop()
    stopServe(signal)
  }
  // Kept for repeats: a second Ctrl-C during the stop is ignored rather than killing the process mid-way.
  process.on('SIGINT', () => void onSignal('SIGINT'))
  process.on('SIGTERM', () => void onSignal('SIGTERM'))

  const links = new SignInLinks()
  const name = randomHostName()
  let port = 0
  let base = ''
  // The link's file (--open, or an output others may read), removed once the link is used, expired or the process ends.
  let linkFile: LinkFile | undefined
  removeStaleLinkFiles(dataDir)
  const out = (line: string) => process.stdout.write(`${line}\n`)
  try {
    return await (await import('../server/serve.ts')).serve(config, {
      routes: (deps) => localSignInRoutes(deps, links, { name, used: () => linkFile?.remove() }),
      listen: (open) => listenLoopback(open, config.port),
      screen: hostScreen(name, () => port),
      publicUrlFor: (address) => {
        port = address.port
        return (base = `http://${name}:${port}`)
      },
      stop,
      ready: async (deps) => {
        const user = await localUser(deps)
        // Before a link exists: whatever an earlier run handed out (a session, a key) stops working now.
        await endEarlierRuns(deps, user)
        const key = await agentKey(deps, user)
        const link = `${base}${SIGN_IN_PATH}?token=${links.issue(user.id, deps.clock())}`
        const exposure = process.platform === 'win32' ? undefined : outputExposure(fstatSync(1), process.getuid!())
        if (exposure || flags.open) {
          linkFile = writeLinkFile(dataDir, link)
          setTimeout(() => linkFile?.remove(), SIGN_IN_LIFETIME_MS).unref()
        }
        out(`dbm local ${VERSION}: monitoring ${agentConfig.databases.map((d) => d.name).join(', ')}`)
        out(`Data:      ${dataDir}`)
        if (exposure && linkFile) {
          // Not even the host name: it is this run's, and the session cookies are its alone.
          out(`Dashboard: its address is in ${linkFile.path} (${exposure}: neither it nor the link is printed here)`)
          out(`Sign in:   open ${linkFile.path} in the browser, or read the link in it`)
        } else {
          out(`Dashboard: ${base}/`)
          out(`Sign in:   ${link}`)
        }
        out('           (the link works once, within 15 minutes; a new run prints a new one)')
        const plans = explainLine(agentConfig, flags['explain-trusted-role'] ?? [])
        if (plans) out(plans)
        // The browser it may start gets the user's umask, not this process's.
        if (flags.open && linkFile) withUmask(userUmask, () => openBrowser(linkFile!, log))
        if (stopping) return
        // The agent over loopback by address (no name to resolve), with its key: the Host check lets it in.
        agentConfig.api = { endpoint: `http://127.0.0.1:${port}`, key }
        agent = new Agent({ configPath: 'dbm local (in memory)', config: agentConfig, bufferDir: dataDir, log })
        agentStarted = agent.start()
        await agentStarted
        // As `dbm agent --check` says it; a database that does not answer is retried by the agent meanwhile.
        void checkConfig(agentConfig).then((lines) => {
          for (const l of lines) out(redactSecrets(l.line))
          if (lines.some((l) => !l.ok))
            out('The agent keeps trying the databases that failed; they show up once they answer.')
          out('Stop with Ctrl-C.')
        })
      },
    })
  } catch (e) {
    if (!(e instanceof ListenError)) throw e
    process.stderr.write(`dbm local: ${e.message}\n`)
    return 1
  } finally {
    linkFile?.remove()
    lock.release()
  }
}
