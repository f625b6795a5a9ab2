// Starts the real app (createApp, as `dbm serve` builds it) on a loopback port over a fresh store of
// either kind, with a movable clock and captured log lines, plus small helpers for calling the API.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createApp } from '../../src/server/app.ts'
import { TokenService } from '../../src/server/auth/tokens.ts'
import type { Deps } from '../../src/server/context.ts'
import { startIngestWriter } from '../../src/server/ingest-writer/client.ts'
import { createLogger } from '../../src/shared/log.ts'
import { createMailer } from '../../src/server/mail.ts'
import { openStore } from '../../src/server/store/open.ts'
import type { SqlStore } from '../../src/server/store/sql-store.ts'
import { type StoreKind, testedStoreKinds } from './matrix.ts'
import { sharedPostgres } from './postgres.ts'

export type { StoreKind }
/** The stores the API suites run against (DBM_TEST_STORES narrows them for a local run: test/support/matrix.ts). */
export const storeKinds: StoreKind[] = testedStoreKinds

export const TEST_JWT_SECRET = 'test-secret-that-is-long-enough-for-hs256-0123456789'

/** A fresh store location of the given kind: a temp data dir, or a new database on the shared server. */
export async function freshStoreLocation(
  kind: StoreKind,
): Promise<{ dataDir: string; databaseUrl?: string; cleanup(): void }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'dbm-test-'))
  const databaseUrl = kind === 'postgres' ? await (await sharedPostgres()).freshDatabase() : undefined
  return { dataDir, databaseUrl, cleanup: () => rmSync(dataDir, { recursive: true, force: true }) }
}

export interface ApiResponse<T = any> {
  status: number
  body: T
  headers: Headers
}

export interface CallOptions {
  body?: unknown
  rawBody?: string
  token?: string
  apiKey?: string
  headers?: Record<string, string>
  /** Client address presented through X-Forwarded-For (the test server trusts the proxy). */
  ip?: string
}

export interface TestServer {
  kind: StoreKind
  base: string
  store: SqlStore
  deps: Deps
  logs: string[]
  /** Moves the server's clock forward. */
  advance(ms: number): void
  /** Stops the server's clock where it is (advance still moves it), or lets it run again from there. */
  freeze(frozen: boolean): void
  call<T = any>(method: string, path: string, options?: CallOptions): Promise<ApiResponse<T>>
  /** The link of the newest logged mail to `to` with a subject matching `subject`. */
  mailLink(to: string, subject: RegExp): string | undefined
  stop(): Promise<void>
}

let addressCounter = 0
/** A client address no other call in this process used, so auth rate limits do not interfere. */
export function uniqueIp(): string {
  addressCounter++
  return `10.${(addressCounter >> 16) & 255}.${(addressCounter >> 8) & 255}.${addressCounter & 255}`
}

export async function startTestServer(
  kind: StoreKind,
  options: {
    trustProxy?: boolean
    smtpUrl?: string
    publicUrl?: string
    dataDir?: string
    databaseUrl?: string
    port?: number
    doctorThresholds?: Deps['doctorThresholds']
    /** Where webhooks may go: tests delivering to a loopback receiver allow internal addresses. */
    webhooks?: Deps['webhooks']
    /** DBM_SIGNUP; absent: open. */
    signup?: Deps['signup']
    /** DBM_METRICS_TOKEN; absent: GET /metrics' server-wide view is off. */
    metricsToken?: string
    /** The caps on ingests in flight; absent: the limits' table. */
    ingestAdmission?: Deps['ingestAdmission']
    /** Batches applied by the ingest writer's thread, as `dbm serve` does (its deadline shortened when given); absent: by the route. */
    ingestWriter?: boolean | { deadlineMs?: number }
    /** The store's rollup spread (`dbm serve`'s limits.ts rollupSpreadMs); absent: 0, each rolls up at once. */
    rollupSpreadMs?: number
  } = {},
): Promise<TestServer> {
  const location = options.dataDir
    ? { dataDir: options.dataDir, databaseUrl: options.databaseUrl, cleanup() {} }
    : await freshStoreLocation(kind)
  const { store } = await openStore({ ...location, rollupSpreadMs: options.rollupSpreadMs })
  const logs: string[] = []
  const log = createLogger('debug', (line) => logs.push(line))
  let offset = 0
  let frozenAt: number | undefined
  const clock = () => (frozenAt ?? Date.now()) + offset
  const publicUrl = options.publicUrl ?? 'http://dbm.test:8080'
  const deps: Deps = {
    store,
    tokens: new TokenService(TEST_JWT_SECRET, clock),
    mailer: createMailer({ smtpUrl: options.smtpUrl, from: 'dbm <dbm@test>', log }),
    log,
    clock,
    publicUrl,
    trustProxy: options.trustProxy ?? true,
    doctorThresholds: options.doctorThresholds,
    webhooks: options.webhooks,
    signup: options.signup,
    metricsToken: options.metricsToken,
    ingestAdmission: options.ingestAdmission,
  }
  if (options.ingestWriter) {
    deps.ingestWriter = await startIngestWriter({
      dataDir: location.dataDir,
      databaseUrl: location.databaseUrl,
      logLevel: 'debug',
      log,
      clock,
      rollupSpreadMs: options.rollupSpreadMs,
      writeFaults: store.writeFaults,
      deadlineMs: options.ingestWriter === true ? undefined : options.ingestWriter.deadlineMs,
    })
  }
  const app = createApp(deps).listen({ hostname: '127.0.0.1', port: options.port ?? 0 })
  const base = `http://127.0.0.1:${app.server!.port}`

  const call = async <T>(method: string, path: string, o: CallOptions = {}): Promise<ApiResponse<T>> => {
    const headers: Record<string, string> = { ...o.headers }
    if (o.body !== undefined) headers['content-type'] = 'application/json'
    if (o.token) headers.authorization = `Bearer ${o.token}`
    if (o.apiKey) headers['x-api-key'] = o.apiKey
    if (o.ip) headers['x-forwarded-for'] = o.ip
    const res = await fetch(base + path, {
      method,
      headers,
      body: o.rawBody ?? (o.body !== undefined ? JSON.stringify(o.body) : undefined),
    })
    const text = await res.text()
    let body: any = text
    try {
      body = text ? JSON.parse(text) : null
    } catch {}
    return { status: res.status, body, headers: res.headers }
  }

  return {
    kind,
    base,
    store: store as SqlStore,
    deps,
    logs,
    advance: (ms) => {
      offset += ms
    },
    freeze: (frozen) => {
      if (frozen) frozenAt ??= Date.now()
      else if (frozenAt !== undefined) {
        offset += frozenAt - Date.now()
        frozenAt = undefined
      }
    },
    call,
    mailLink(to, subject) {
      for (let i = logs.length - 1; i >= 0; i--) {
        const line = logs[i]!
        if (!line.includes(' INFO mail ') || !line.includes(`to=${to}`)) continue
        const s = /subject="([^"]*)"/.exec(line)?.[1] ?? ''
        if (subject.test(s)) return /link=(\S+)/.exec(line)?.[1]?.replace(/^"|"$/g, '')
      }
      return undefined
    },
    async stop() {
      await app.stop(true)
      await deps.ingestWriter?.close()
      await deps.mailer.idle()
      await store.close()
      location.cleanup()
    },
  }
}

export interface Account {
  email: string
  password: string
  token: string
  refreshToken: string
  userId: string
  orgId: string
}

let accountCounter = 0
/** Signs up a new account (from its own client address) and returns its tokens. */
export async function signup(
  server: TestServer,
  overrides: { email?: string; org_name?: string } = {},
): Promise<Account> {
  const email = overrides.email ?? `user${++accountCounter}-${Math.random().toString(36).slice(2, 7)}@example.com`
  const password = 'correct horse battery'
  const res = await server.call('POST', '/api/v1/auth/signup', {
    ip: uniqueIp(),
    body: { email, password, name: 'Test User', org_name: overrides.org_name ?? 'Test Org' },
  })
  if (res.status !== 201) throw new Error(`signup failed: ${res.status} ${JSON.stringify(res.body)}`)
  return {
    email,
    password,
    token: res.body.access_token,
    refreshToken: res.body.refresh_token,
    userId: res.body.user.id,
    orgId: res.body.organization.id,
  }
}

/** The API call behind a verification link (`<public URL>/#/verify?token=…`, the dashboard's verify page). */
export function verifyCall(link: string): string {
  const token = new URLSearchParams(new URL(link).hash.split('?')[1] ?? '').get('token') ?? ''
  return `/api/v1/auth/verify-email?token=${encodeURIComponent(token)}`
}

/** Does what the verification mail's link does, making the account's organization verified. */
export async function verify(server: TestServer, account: Account): Promise<void> {
  const link = server.mailLink(account.email, /verify/i)
  if (!link) throw new Error(`no verification mail for ${account.email}`)
  const res = await server.call('GET', verifyCall(link))
  if (res.status !== 200) throw new Error(`verification failed: ${res.status} ${JSON.stringify(res.body)}`)
}

/** Every scope a key may hold: what keys could do before scopes, and what most tests' keys still do. */
export const ALL_SCOPES = ['ingest', 'read', 'admin']

/**
 * A new API key of the account's organization, with every scope unless `scopes` says (the API's own
 * default, when a request names none, is ingest and read: test/api/api-key-scopes.test.ts).
 */
export async function createApiKey(
  server: TestServer,
  account: Account,
  name = 'test key',
  scopes: string[] = ALL_SCOPES,
): Promise<{ id: string; key: string }> {
  const res = await server.call('POST', '/api/v1/api-keys', { token: account.token, body: { name, scopes } })
  if (res.status !== 201) throw new Error(`key creation failed: ${res.status} ${JSON.stringify(res.body)}`)
  return { id: res.body.id, key: res.body.key }
}

/** A new account on the server (verified unless told otherwise) and an API key of its organization: what an agent needs. */
export async function agentAccount(
  server: TestServer,
  options: { verified?: boolean; keyName?: string; scopes?: string[] } = {},
): Promise<{ account: Account; key: string }> {
  const account = await signup(server)
  if (options.verified ?? true) await verify(server, account)
  return { account, key: (await createApiKey(server, account, options.keyName ?? 'agent', options.scopes)).key }
}

/** A member of `owner`'s organization, named "A Member", joined through an invite (the link its mail carries). */
export async function inviteMember(server: TestServer, owner: Account): Promise<Account> {
  const email = `member-${Math.random().toString(36).slice(2, 9)}@example.com`
  const res = await server.call('POST', '/api/v1/organization/invites', {
    token: owner.token,
    body: { email, role: 'member' },
  })
  if (res.status !== 201) throw new Error(`invite failed: ${res.status} ${JSON.stringify(res.body)}`)
  await server.deps.mailer.idle()
  const token = new URL(server.mailLink(email, /invited/)!).searchParams.get('token')
  const password = 'member password 1'
  const accepted = await server.call('POST', '/api/v1/auth/accept-invite', {
    ip: uniqueIp(),
    body: { token, name: 'A Member', password },
  })
  if (accepted.status !== 201)
    throw new Error(`accepting the invite failed: ${accepted.status} ${JSON.stringify(accepted.body)}`)
  return {
    email,
    password,
    token: accepted.body.access_token,
    refreshToken: accepted.body.refresh_token,
    userId: accepted.body.user.id,
    orgId: owner.orgId,
  }
}
