// What every route needs, built once by the server and passed to each route module.
import type { TokenService } from './auth/tokens.ts'
import type { Logger } from '../shared/log.ts'
import type { Mailer } from './mail.ts'
import type { SignupMode } from './config.ts'
import type { Store } from './store/types.ts'
import type { WebhookPolicy } from './webhook-target.ts'
import type { LoopLag } from './loop-lag.ts'
import type { Diagnoser } from './doctor/diagnosis.ts'
import type { IngestAdmission } from './ingest-admission.ts'
import type { IngestWriter } from './ingest-writer/client.ts'

export interface Deps {
  store: Store
  tokens: TokenService
  mailer: Mailer
  log: Logger
  /** Epoch milliseconds; injectable so tests can move time. */
  clock: () => number
  /** Base of links in mails, without a trailing slash. */
  publicUrl: string
  /** Use X-Forwarded-For as the client address (only behind a trusted proxy). */
  trustProxy: boolean
  /** DBM_SIGNUP: `closed` refuses signups once the store has an organization; absent means `open`. */
  signup?: SignupMode
  /** Doctor thresholds that replace a rule's own, by rule id then threshold name (tests use it to make time pass). */
  doctorThresholds?: Record<string, Record<string, number>>
  /** Where webhooks may go (DBM_WEBHOOK_ALLOW_PRIVATE); absent: internal addresses refused, system DNS. */
  webhooks?: WebhookPolicy
  /** The open streams (active-queries WebSockets): `dbm serve` closes them with 1001 when it stops. */
  streams?: Set<{ close(code?: number, reason?: string): void }>
  /** The event loop's lag (`dbm serve` samples it; /healthz reports it). */
  loopLag?: LoopLag
  /** The diagnosis worker (`dbm serve` starts one): the health monitor's diagnoses run there. */
  diagnoser?: Diagnoser
  /** How long an API request waits for a diagnosis before its 503 (default API_WAIT_MS; tests shorten it). */
  diagnosisWaitMs?: number
  /** DBM_METRICS_TOKEN: the bearer token of GET /metrics' server-wide view; absent: that view is off. */
  metricsToken?: string
  /**
   * When this process began serving (the clock's epoch ms; `dbm serve` sets it): agent silence that began
   * before it is judged only after the restart grace (doctor rule agent_disconnected). Absent: no grace.
   */
  servingSince?: number
  /** The caps on ingests in flight (ingest-admission.ts); createApp makes one with the limits' table when absent. */
  ingestAdmission?: IngestAdmission
  /** The ingest writer's thread (`dbm serve` starts one): batches are parsed and applied there; absent: in the route. */
  ingestWriter?: IngestWriter
}

/**
 * The client's full address. Behind a trusted proxy it is the last X-Forwarded-For entry: the one that
 * proxy appended. Earlier entries are whatever the client sent and prove nothing. Rate limits count it
 * by rateLimitSubject (its /64 for IPv6).
 */
export function clientAddress(
  deps: Pick<Deps, 'trustProxy'>,
  request: Request,
  server: { requestIP(r: Request): { address: string } | null } | null,
): string {
  if (deps.trustProxy) {
    const forwarded = request.headers.get('x-forwarded-for')?.split(',').at(-1)?.trim()
    if (forwarded) return forwarded
  }
  return server?.requestIP(request)?.address ?? 'unknown'
}
