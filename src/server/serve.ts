// `dbm serve`: open the store (migrating it), build the app, listen, sweep stale rate-limit rows, run
// the health monitor (alerts, recommendations, retention), and stop cleanly on SIGINT/SIGTERM.
import { createApp } from './app.ts'
import { TokenService } from './auth/tokens.ts'
import { type ServeConfig, loadJwtSecret } from './config.ts'
import { createLogger } from '../shared/log.ts'
import { createHealthMonitor } from './health-monitor.ts'
import { startDiagnosisWorker } from './doctor/diagnosis-worker.ts'
import { createMailer } from './mail.ts'
import { rateEventRetentionMs } from './limits.ts'
import { isStoreUnreachable } from './store/availability.ts'
import { openStore } from './store/open.ts'
import { startLoopLag } from './loop-lag.ts'
import { VERSION } from '../version.ts'

/** How long a stopping server waits for requests in flight before it closes their connections. */
const STOP_GRACE_MS = 5_000

export async function serve(config: ServeConfig): Promise<number> {
  const log = createLogger(config.logLevel)
  let opened
  try {
    opened = await openStore({
      databaseUrl: config.databaseUrl,
      dataDir: config.dataDir,
      // Before each migration: some rebuild tables (10: about 15 to 30 s per GB of SQLite store), and the
      // server answers nothing until they are done.
      applying: (m, storeBytes) =>
        log.info('applying migration', { version: m.version, name: m.name, ...(storeBytes !== null ? { store_mb: Math.round(storeBytes / 1e6) } : {}) }),
      columnAdded: (c) => log.info('store column added for a counter', { table: c.table, column: c.column, definition: c.definition }),
    })
  } catch (e) {
    log.error('cannot open the store', { cause: (e as Error).message })
    return 1
  }
  const { store } = opened
  const mailer = createMailer({ smtpUrl: config.smtpUrl, from: config.smtpFrom, log })
  const deps = {
    store,
    tokens: new TokenService(loadJwtSecret(config)),
    mailer,
    log,
    clock: Date.now,
    publicUrl: config.publicUrl,
    trustProxy: config.trustProxy,
    signup: config.signup,
    webhooks: { allowPrivate: config.webhookAllowPrivate },
    streams: new Set<{ close(code?: number, reason?: string): void }>(),
    loopLag: startLoopLag(),
  }
  let app
  try {
    // reusePort off: a second dbm on a taken port must fail, not split requests between two stores.
    app = createApp(deps).listen({ hostname: config.hostname, port: config.port, reusePort: false })
  } catch (e) {
    log.error('cannot listen', { address: `${config.hostname}:${config.port}`, cause: (e as Error).message })
    await store.close()
    return 1
  }
  log.info('dbm serve listening', {
    version: VERSION,
    address: `${app.server?.hostname}:${app.server?.port}`,
    store: `${store.dialect} ${opened.location}`,
    migrations_applied: opened.applied.length ? opened.applied.join(',') : 'none',
    mail: config.smtpUrl ? 'smtp' : 'log',
  })
  if (config.webhookAllowPrivate) log.warn('webhooks may go to internal addresses (DBM_WEBHOOK_ALLOW_PRIVATE=true)')

  const sweep = setInterval(() => {
    store.sweepRateEvents(Date.now() - rateEventRetentionMs).catch((e) => {
      if (!isStoreUnreachable(e)) log.warn('rate-limit sweep failed', { cause: (e as Error).message })
    })
  }, 10 * 60 * 1000)
  // The doctor's work for the health monitor runs in a thread of its own (doctor/worker.ts) once it has
  // started (in the background: the server answers, and handles signals, meanwhile).
  const diagnoser = startDiagnosisWorker({ dataDir: config.dataDir, databaseUrl: config.databaseUrl, logLevel: config.logLevel, log }).then(
    (started) => {
      Object.assign(deps, { diagnoser: started })
      return started
    },
    (e) => {
      log.warn('no diagnosis worker; the health monitor diagnoses on the main thread', { cause: (e as Error).message })
      return undefined
    },
  )
  const monitor = createHealthMonitor(deps, { retentionDays: config.retentionDays })
  monitor.start()

  return new Promise((resolve) => {
    let stopping = false
    const stop = async (signal: string) => {
      if (stopping) return
      stopping = true
      log.info('stopping', { signal })
      clearInterval(sweep)
      // Streams never end by themselves: they are told the server is going away (1001), and requests
      // in flight get STOP_GRACE_MS to finish before their connections are closed.
      for (const stream of deps.streams) stream.close(1001, 'server shutting down')
      const server = app.server
      if (server) {
        const drained = server.stop(false).then(() => true)
        if (!(await Promise.race([drained, Bun.sleep(STOP_GRACE_MS).then(() => false)]))) {
          log.warn('closing connections still open', { after_ms: STOP_GRACE_MS })
          await server.stop(true)
        }
      }
      await monitor.stop()
      await (await diagnoser)?.close()
      await mailer.idle()
      mailer.close()
      deps.loopLag.stop()
      await store.close()
      resolve(0)
    }
    process.once('SIGINT', () => void stop('SIGINT'))
    process.once('SIGTERM', () => void stop('SIGTERM'))
  })
}
