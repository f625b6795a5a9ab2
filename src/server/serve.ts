// `dbm serve`: open the store (migrating it), listen, build the API, sweep stale rate-limit rows, run
// the monitor (alerts, recommendations, retention), and stop cleanly on SIGINT/SIGTERM.
//
// Start-up order (issue 13: from the start to the first 200 on /healthz in at most 50 ms). The listener
// opens as soon as the store is open, and answers a plain GET /healthz itself (healthz.ts: the app's own
// answer, 200 only when the store answers) while the API is built: Elysia, the routes and their schemas,
// the token service and the mailer are loaded and set up after listen (some tens of milliseconds in the
// binary; bench/RESULTS.md, Start-up), and so is the store's own code (sql-store.ts and its queries):
// before listen only the driver is opened and migrated. Any other request that arrives meanwhile waits
// for the API and is then handled by it. Once built, the API takes the listener over (server.reload):
// from then on every request, /healthz included, goes through the app alone. The health monitor, the
// diagnosis worker, the ingest writer and the SQLite store's checkpoint worker start after that (nothing checkpoints the
// WAL until then: what the first requests write waits in it for some tens of milliseconds). (The one
// difference in that window: the listener does not apply the app's header size limit, so a /healthz
// with more than 16 KiB of headers gets its 200 rather than the app's 431.)
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import type { Server } from 'bun'
import type { AnyElysia } from 'elysia'
import { type ServeConfig, loadJwtSecret, openSignupWarning } from './config.ts'
import type { Deps } from './context.ts'
import { createLogger } from '../shared/log.ts'
import { healthz, signupGate } from './healthz.ts'
import { rateEventRetentionMs, rollupSpreadMs } from './limits.ts'
import { startLoopLag } from './loop-lag.ts'
import { IDLE_TIMEOUT_S, serverOptions } from './server-options.ts'
import { isStoreFault } from './store-outages.ts'
import { openDriver } from './store/open.ts'
import type { SqlStore } from './store/sql-store.ts'
import { securityHeaders } from './web/security-headers.ts'
import { sharedSecret } from './store/server-secrets.ts'
import { WIRE_VERSION, WIRE_VERSION_HEADER } from '../shared/wire-contract.ts'
import { VERSION } from '../version.ts'

/** How long a stopping server waits for requests in flight before it closes their connections. */
const STOP_GRACE_MS = 5_000

/** Every 10 minutes: rate-limit rows older than their window are deleted. */
const RATE_SWEEP_MS = 10 * 60 * 1000

/**
 * Settles after the event loop has had a turn, its I/O included. A timer rather than setImmediate: Bun
 * runs the immediates queued before a turn in one go (the checkpoint worker's start, then the next part
 * of the API), so a /healthz that had arrived waited for both; after a timer it is answered first
 * (measured with timestamps in the binary: listen to that answer ~10 ms instead of ~19 at load 5).
 */
const nextTurn = () => new Promise<void>((resolve) => setTimeout(resolve, 0))

/**
 * What `dbm local` (src/local/) adds to a serve; `dbm serve` passes none of it.
 */
export interface ServeHooks {
  /** Routes of its own, registered with the app's (the one-time sign-in link). */
  routes?: (deps: Deps) => AnyElysia
  /** The base of links (the public URL) once the port is known (a port the OS assigned). */
  publicUrlFor?: (address: { hostname: string; port: number }) => string
  /** Awaited once the API is built, before it answers anything but /healthz; a throw stops the serve (exit 1). */
  ready?: (deps: Deps) => Promise<void>
  /** Settles with a signal's name when the serve should stop: the caller, not serve, then handles SIGINT and SIGTERM. */
  stop?: Promise<string>
  /**
   * Opens the listeners instead of one on the configured address (dbm local: one port on 127.0.0.1 and
   * ::1), each with `open`; the first one's address is logged and given to publicUrlFor. A throw stops the
   * serve and is rethrown to the caller, who says why in its own words.
   */
  listen?: (open: (hostname: string, port: number) => Server<unknown>) => Server<unknown>[]
  /** Answers a request itself, before anything else does, when it returns a response (dbm local's Host check). */
  screen?: (request: Request) => Response | undefined
}

type Fetch = (
  request: Request,
  server: Server<unknown>,
) => Response | Promise<Response> | undefined | Promise<Response | undefined>

/** `primary`, except that a request's address and upgrade are those of the listener that received it. */
function appServer(primary: Server<unknown>, receivedBy: WeakMap<Request, Server<unknown>>): Server<unknown> {
  const of = (request: Request) => receivedBy.get(request) ?? primary
  return new Proxy(primary, {
    get(target, property) {
      if (property === 'upgrade')
        return (request: Request, options?: unknown) => of(request).upgrade(request, options as never)
      if (property === 'requestIP') return (request: Request) => of(request).requestIP(request)
      const value = Reflect.get(target, property, target)
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
}

export async function serve(config: ServeConfig, hooks: ServeHooks = {}): Promise<number> {
  const log = createLogger(config.logLevel)
  let opened
  try {
    opened = await openDriver({
      databaseUrl: config.databaseUrl,
      dataDir: config.dataDir,
      // Before each migration: some rebuild tables (10: about 15 to 30 s per GB of SQLite store), and the
      // server answers nothing until they are done.
      applying: (m, storeBytes) =>
        log.info('applying migration', {
          version: m.version,
          name: m.name,
          ...(storeBytes !== null ? { store_mb: Math.round(storeBytes / 1e6) } : {}),
        }),
      // A counter a family gained (src/shared/families.ts) becomes a column of the existing store.
      columnAdded: (c) =>
        log.info('store column added for a counter', { table: c.table, column: c.column, definition: c.definition }),
      retrying: (attempt, cause) =>
        log.warn('store busy: adding counter columns waits for other serves ingesting; trying again', {
          attempt,
          cause: (cause as Error).message,
        }),
      // Started with the health monitor, after the API is built (below).
      checkpointsWhenTold: true,
    })
  } catch (e) {
    log.error('cannot open the store', { cause: (e as Error).message })
    return 1
  }
  const { driver } = opened
  let jwtSecret: string
  let jwtAccepted: string[] = []
  let jwtGenerated = false
  try {
    // Read (or generated) before listening: a bad secret file stops the start with its message.
    jwtGenerated = !config.jwtSecret && !existsSync(join(config.dataDir, 'jwt-secret'))
    jwtSecret = loadJwtSecret(config)
  } catch (e) {
    await driver.close()
    throw e
  }
  if (!config.jwtSecret) {
    // The store's secret signs, so that every serve of the store and every later release accept the
    // same sessions whatever data directory they start with; the first start stores this directory's
    // (an upgrade keeps the secret the sessions were signed with). Tokens signed with this directory's
    // secret, when the store holds another, are still accepted until they expire. A SQLite store lives in
    // the data directory: a secret file deleted to sign everyone out replaces the store's, as it always did.
    try {
      const local = jwtSecret
      jwtSecret = await sharedSecret(driver, 'jwt', local, Date.now(), jwtGenerated && driver.dialect === 'sqlite')
      if (jwtSecret !== local) {
        jwtAccepted = [local]
        log.info(
          "signing sessions with the store's JWT secret, shared by every serve of the store; the data directory's still verifies the tokens it signed",
        )
      }
    } catch (e) {
      log.error('cannot open the store', { cause: `reading the JWT secret: ${(e as Error).message}` })
      await driver.close()
      return 1
    }
  }
  // Signal handlers from here on, before listening: a SIGINT that arrives as soon as the listening line is
  // out (a quick Ctrl-C) would otherwise find no handler and end the process without closing the store.
  // One that comes before stop() exists is kept and acted on then. Handlers stay for repeats: Ctrl-C on
  // `bun run serve` reaches the server twice (from the terminal to the process group, and forwarded by
  // `bun run`), and a second signal without a handler would kill it mid-stop, leaving the SQLite
  // write-ahead log and lock journal behind. A repeat is ignored by stop().
  let stopOn: ((signal: string) => void) | undefined
  let signalled: string | undefined
  const onSignal = (signal: string) => (stopOn ? stopOn(signal) : (signalled ??= signal))
  if (hooks.stop) void hooks.stop.then(onSignal)
  else {
    process.on('SIGINT', () => onSignal('SIGINT'))
    process.on('SIGTERM', () => onSignal('SIGTERM'))
  }
  const loopLag = startLoopLag()
  // The store's code (the SqlStore and its queries, some milliseconds of module loading) is loaded after
  // listen, as the API's first part; the listener's /healthz needs the driver alone (and, with
  // DBM_SIGNUP=closed, the store, which it waits for).
  let loadStore: Promise<SqlStore> | undefined
  const early = {
    store: {
      ping: () => driver.ping(),
      hasOrganization: async () => (await loadStore!).hasOrganization(),
      writeFaults: driver.writeFaults,
      probeWrite: async () => driver.probeWrite?.(),
    },
    signup: config.signup,
    loopLag,
  }
  const signupClosed = signupGate(early)

  // Until the API is built: a plain GET /healthz is answered here, anything else waits for the API. (A
  // query string, another method or a trailing slash goes to the app, which answers it as it always does.)
  let api: Promise<Fetch> | undefined
  const starting: Fetch = async (request, server) => {
    const url = new URL(request.url)
    if (request.method === 'GET' && url.pathname === '/healthz' && url.search === '') {
      const answer = await healthz(early, signupClosed)
      return Response.json(answer.body, {
        status: answer.status,
        headers: { ...securityHeaders, [WIRE_VERSION_HEADER]: String(WIRE_VERSION) },
      })
    }
    return (await api!)(request, server)
  }
  // Each listener's requests go through `handle` (first `starting`, then the app), after the screen; which
  // listener received a request is remembered for the app (see `appServer`).
  const receivedBy = new WeakMap<Request, Server<unknown>>()
  const through =
    (handle: Fetch): Fetch =>
    (request, server) => {
      const refused = hooks.screen?.(request)
      if (refused) return refused
      receivedBy.set(request, server)
      return handle(request, server)
    }
  // reusePort off: a second dbm on a taken port must fail, not split requests between two stores.
  // idleTimeout 30 s as Elysia's own listen has it (a request waiting for a diagnosis is answered before: API_WAIT_MS).
  const open = (hostname: string, port: number) =>
    Bun.serve({
      ...serverOptions,
      hostname,
      port,
      reusePort: false,
      idleTimeout: IDLE_TIMEOUT_S,
      fetch: through(starting) as never,
    })
  let servers: Server<unknown>[]
  try {
    servers = hooks.listen ? hooks.listen(open) : [open(config.hostname, config.port)]
  } catch (e) {
    loopLag.stop()
    await driver.close()
    if (hooks.listen) throw e
    log.error('cannot listen', { address: `${config.hostname}:${config.port}`, cause: (e as Error).message })
    return 1
  }
  const server = servers[0]!
  const address = servers
    .map((s) => (s.hostname?.includes(':') ? `[${s.hostname}]:${s.port}` : `${s.hostname}:${s.port}`))
    .join(',')
  log.info('dbm serve listening', {
    version: VERSION,
    address,
    store: `${driver.dialect} ${opened.location}`,
    migrations_applied: opened.applied.length ? opened.applied.join(',') : 'none',
    mail: config.smtpUrl ? 'smtp' : 'log',
    // open: anyone who reaches the server may sign up; closed: only the first account; local: dbm local's.
    signup: config.signup,
  })
  const exposed = openSignupWarning(
    config.signup,
    servers.map((s) => s.hostname ?? config.hostname),
  )
  if (exposed) log.warn(exposed, { address })
  if (config.webhookAllowPrivate) log.warn('webhooks may go to internal addresses (DBM_WEBHOOK_ALLOW_PRIVATE=true)')

  loadStore = (async () => {
    await nextTurn()
    const { SqlStore } = await import('./store/sql-store.ts')
    return new SqlStore(driver, { rollupSpreadMs })
  })()
  const sweep = setInterval(() => {
    loadStore!
      .then((store) => store.sweepRateEvents(Date.now() - rateEventRetentionMs))
      .catch((e) => {
        if (!isStoreFault(e)) log.warn('rate-limit sweep failed', { cause: (e as Error).message })
      })
  }, RATE_SWEEP_MS)

  // The API, built after listen; then the health monitor and, in a thread of its own (doctor/worker.ts),
  // the doctor's work for it (started in the background: the server answers, and handles signals, meanwhile).
  const started = (async () => {
    const store = await loadStore!
    // In steps, with a turn of the event loop before each, so that a /healthz that arrived meanwhile is
    // answered after the step in progress rather than after the whole build; the modules a part at a
    // time (each import evaluates only what the ones before did not). Not TypeBox's parts on their own
    // before Elysia: in the compiled binary that gave the API a second TypeBox whose checks let numeric
    // strings through ("port": "0" was a 200; the binary's conformance test caught it).
    for (const part of [() => import('elysia'), () => import('../shared/wire.ts'), () => import('./doctor/index.ts')]) {
      await nextTurn()
      await part()
    }
    await nextTurn()
    const { createApp } = await import('./app.ts')
    await nextTurn()
    const [{ TokenService }, { createMailer }, { websocket }] = await Promise.all([
      import('./auth/tokens.ts'),
      import('./mail.ts'),
      import('elysia/ws'),
    ])
    await nextTurn()
    const mailer = createMailer({ smtpUrl: config.smtpUrl, from: config.smtpFrom, log })
    const deps: Deps = {
      store,
      tokens: new TokenService(jwtSecret, Date.now, jwtAccepted),
      mailer,
      log,
      clock: Date.now,
      publicUrl:
        hooks.publicUrlFor?.({ hostname: server.hostname ?? config.hostname, port: server.port ?? config.port }) ??
        config.publicUrl,
      trustProxy: config.trustProxy,
      signup: config.signup,
      webhooks: { allowPrivate: config.webhookAllowPrivate },
      metricsToken: config.metricsToken,
      streams: new Set<{ close(code?: number, reason?: string): void }>(),
      loopLag,
      // Agents buffered while no serve ran: their silence before now is not judged until the restart grace passed.
      servingSince: Date.now(),
    }
    const app = createApp(deps, hooks.routes?.(deps))
    await hooks.ready?.(deps)
    // The app's handlers ask it for the server (the client's address, the WebSocket upgrade): with several
    // listeners, the one that received the request (Bun upgrades a request only on its own server).
    app.server = servers.length === 1 ? server : appServer(server, receivedBy)
    const fetch = app.fetch as Fetch
    for (const s of servers) s.reload({ fetch: through(fetch) as never, websocket: websocket as never })
    await nextTurn()
    const [{ createMonitor }, { startDiagnosisWorker }, { startIngestWriter }] = await Promise.all([
      import('./monitor/index.ts'),
      import('./doctor/diagnosis-worker.ts'),
      import('./ingest-writer/client.ts'),
    ])
    await nextTurn()
    // Agent batches are parsed and applied in a thread of their own (ingest-writer/); until it has
    // opened the store, and if it cannot, the route applies them itself.
    const writer = startIngestWriter({
      dataDir: config.dataDir,
      databaseUrl: config.databaseUrl,
      logLevel: config.logLevel,
      log,
      rollupSpreadMs,
      writeFaults: store.writeFaults,
      clock: deps.clock,
    }).then(
      (w) => {
        Object.assign(deps, { ingestWriter: w })
        return w
      },
      (e) => {
        log.warn('no ingest writer; the ingest route applies batches on the main thread', {
          cause: (e as Error).message,
        })
        return undefined
      },
    )
    const diagnoser = startDiagnosisWorker({
      dataDir: config.dataDir,
      databaseUrl: config.databaseUrl,
      logLevel: config.logLevel,
      local: config.signup === 'local',
      servingSince: deps.servingSince,
      storeRefusals: () => store.writeFaults?.refusals(),
      ingestShedding: () => deps.ingestAdmission?.shedSpan(),
      log,
    }).then(
      (worker) => {
        Object.assign(deps, { diagnoser: worker })
        return worker
      },
      (e) => {
        log.warn('no diagnosis worker; the health monitor diagnoses on the main thread', {
          cause: (e as Error).message,
        })
        return undefined
      },
    )
    const monitor = createMonitor(deps, { retentionDays: config.retentionDays })
    monitor.start()
    opened.startCheckpoints()
    return { fetch, deps, mailer, monitor, diagnoser, writer }
  })()
  api = started.then((s) => s.fetch)

  return new Promise((resolve) => {
    let stopping = false
    const stop = async (signal: string, code = 0) => {
      if (stopping) return
      stopping = true
      log.info('stopping', { signal })
      clearInterval(sweep)
      const parts = await started.catch(() => undefined)
      // Streams never end by themselves: they are told the server is going away (1001), and requests
      // in flight get STOP_GRACE_MS to finish before their connections are closed.
      for (const stream of parts?.deps.streams ?? []) stream.close(1001, 'server shutting down')
      const drained = Promise.all(servers.map((s) => s.stop(false))).then(() => true)
      if (!(await Promise.race([drained, Bun.sleep(STOP_GRACE_MS).then(() => false)]))) {
        log.warn('closing connections still open', { after_ms: STOP_GRACE_MS })
        await Promise.all(servers.map((s) => s.stop(true)))
      }
      if (parts) {
        await parts.monitor.stop()
        await (await parts.diagnoser)?.close()
        await (await parts.writer)?.close()
        await parts.mailer.idle()
        parts.mailer.close()
      }
      loopLag.stop()
      await driver.close()
      resolve(code)
    }
    started.catch((e) => {
      log.error('cannot build the API', { cause: (e as Error).message })
      void stop('none', 1)
    })
    stopOn = (signal) => void stop(signal)
    if (signalled) stopOn(signalled)
  })
}
