// GET /healthz's answer, shared by the app's route and by `dbm serve`'s listener, which answers it from
// the moment the store is open, before the rest of the API is built (serve.ts). 200 only when the store
// answers a trivial query and its latest write was not refused (a full disk: `reason` says so); `signup` tells the dashboard whether to offer a signup form (DBM_SIGNUP);
// `event_loop` is how late the event loop ran over the last minute (loop-lag.ts). This module stays
// small on purpose: it is on the path from `dbm serve`'s start to its first answer.
import type { Static } from '@sinclair/typebox'
import type { Healthz, HealthzUnavailable } from '../shared/api/health.ts'
import type { SignupMode } from './config.ts'
import type { LoopLag } from './loop-lag.ts'
import { storeAnswers, storeRefusal } from './store-outages.ts'
import type { Store } from './store/types.ts'
import { VERSION } from '../version.ts'

export interface HealthzDeps {
  /** The store, or (serve's listener, before the store's code is loaded) what of it /healthz asks. */
  store: Pick<Store, 'ping' | 'hasOrganization'> & Partial<Pick<Store, 'writeFaults' | 'probeWrite'>>
  signup?: SignupMode
  loopLag?: LoopLag
}

/**
 * Whether signups are refused: DBM_SIGNUP=closed once an organization exists (which, once true, stays
 * true, so the store is asked only until it is).
 */
export function signupGate(deps: Pick<HealthzDeps, 'store' | 'signup'>): () => Promise<boolean> {
  let organizationSeen = false
  return async () => {
    if (deps.signup === 'local') return true
    if (deps.signup !== 'closed') return false
    organizationSeen ||= await deps.store.hasOrganization()
    return organizationSeen
  }
}

export type HealthzAnswer =
  | { status: 200; body: Static<typeof Healthz> }
  | { status: 503; body: Static<typeof HealthzUnavailable> }

/** The status and JSON body of GET /healthz. */
export async function healthz(deps: HealthzDeps, signupClosed: () => Promise<boolean>): Promise<HealthzAnswer> {
  const loop = deps.loopLag ? { event_loop: deps.loopLag.figures() } : {}
  const refusal = await storeRefusal(deps.store)
  if (refusal) {
    // The cause in plain words and its code, not the driver's message (a file path, a role name): /healthz
    // answers anyone.
    const reason = `${refusal.reason} (${refusal.code})`.slice(0, 300)
    return { status: 503, body: { status: 'unavailable', version: VERSION, store: 'unavailable', reason, ...loop } }
  }
  if (await storeAnswers(deps.store)) {
    return {
      status: 200,
      body: {
        status: 'ok',
        version: VERSION,
        store: 'ok',
        signup: deps.signup === 'local' ? 'local' : (await signupClosed()) ? 'closed' : 'open',
        ...loop,
      },
    }
  }
  return { status: 503, body: { status: 'unavailable', version: VERSION, store: 'unavailable', ...loop } }
}
