// How `serve` behaves while its store cannot be reached: a request that needs the store is answered
// 503 {"error": "store unavailable"} with Retry-After (never a 500), the outage is logged once when it
// starts (error) and once when the store answers again (info), and /healthz says whether the store
// answers a trivial query within a short deadline. Nothing needs restarting: the driver reconnects.
// The same for writes the store refuses for a while (StoreTryLater: its disk is full, it is a standby):
// 503 with the cause and Retry-After, one error line per episode naming the cause (write-faults.ts), and
// /healthz 503 with the reason until a write succeeds (it probes with a small write, at most every 5 s).
import type { Logger } from '../shared/log.ts'
import { HttpError } from './http-error.ts'
import { type StoreTryLater, storeTryLater } from './store/driver.ts'
import { isStoreUnreachable } from './store/reachability.ts'
import type { Store } from './store/types.ts'
import type { WriteRefusal } from './store/write-faults.ts'

/** What a 503 tells the client to wait before it tries again. */
export const STORE_RETRY_AFTER_SECONDS = 5
/** How long /healthz waits for the store's answer before it reports the store unavailable. */
export const STORE_HEALTH_DEADLINE_MS = 2_000

export function storeUnavailable(): HttpError {
  return new HttpError(503, 'store unavailable', { 'retry-after': String(STORE_RETRY_AFTER_SECONDS) })
}

/** What a 503 for a refused write tells the client to wait: as for an outage (the agent adds its jitter). */
export const STORE_REFUSAL_RETRY_AFTER_SECONDS = STORE_RETRY_AFTER_SECONDS
/** The most characters of the driver's own text a refusal's answer carries. */
const REFUSAL_DETAIL_CHARS = 300

/** The 503 of a write the store refused (StoreTryLater), naming the cause. */
export function storeRefused(refusal: StoreTryLater): HttpError {
  return new HttpError(503, refusal.message.slice(0, REFUSAL_DETAIL_CHARS), {
    'retry-after': String(STORE_REFUSAL_RETRY_AFTER_SECONDS),
  })
}

/**
 * True when `error` is a fault of the store that is logged once per episode (it cannot be reached, or
 * refuses writes for a while): callers that log their own failures leave those out.
 */
export function isStoreFault(error: unknown): boolean {
  return isStoreUnreachable(error) || storeTryLater(error) !== undefined
}

/** The 503 for a fault of the store (isStoreFault), or undefined for any other error. */
export function storeFaultAnswer(error: unknown): HttpError | undefined {
  if (isStoreUnreachable(error)) return storeUnavailable()
  const refusal = storeTryLater(error)
  return refusal ? storeRefused(refusal) : undefined
}

/** The innermost error that carries a code (the driver's or the socket's), for the log. */
function rootCause(error: unknown): { code?: string; cause?: string } {
  let found: { code?: unknown; message?: unknown } | undefined
  for (
    let e = error as { code?: unknown; message?: unknown; cause?: unknown } | undefined, depth = 0;
    e && depth < 8;
    e = e.cause as typeof e, depth++
  ) {
    if (typeof e !== 'object') break
    if (e.code !== undefined || !found) found = e
  }
  return {
    code: typeof found?.code === 'string' ? found.code : undefined,
    cause: typeof found?.message === 'string' ? found.message : undefined,
  }
}

/** Logs each outage episode of the store twice: when it starts and when it ends. Returns the unsubscribe. */
export function logStoreOutages(store: Store, log: Logger): () => void {
  const reachability = store.reachability
  if (!reachability) return () => {}
  return reachability.onChange((change) => {
    if (change.available) log.info('store available again', { unavailable_for_ms: change.unavailableForMs })
    else
      log.error(
        'store unavailable; requests that need it are answered 503 until it answers again',
        rootCause(change.cause),
      )
  })
}

/** Logs each episode of refused writes twice: when it starts (naming the cause) and when it ends. */
export function logStoreWriteFaults(store: Pick<Store, 'writeFaults'>, log: Logger): () => void {
  const faults = store.writeFaults
  if (!faults) return () => {}
  return faults.onChange((change) => {
    if (change.failing)
      log.error('store refuses writes; requests that write are answered 503 until one succeeds', {
        code: change.error.code,
        cause: change.error.message,
      })
    else
      log.info('store takes writes again', {
        code: change.error.code,
        refused_for_ms: change.failedForMs,
        refused: change.refused,
      })
  })
}

/**
 * The refusal of the store's latest write while no write has succeeded since (undefined otherwise). While
 * there is one, a small write probes the store, at most once per WRITE_PROBE_EVERY_MS and within
 * `deadlineMs`, so that /healthz sees the space freed without waiting for the next batch.
 */
export async function storeRefusal(
  store: Partial<Pick<Store, 'writeFaults' | 'probeWrite'>>,
  deadlineMs = STORE_HEALTH_DEADLINE_MS,
): Promise<WriteRefusal | undefined> {
  const faults = store.writeFaults
  if (!faults?.failing) return undefined
  if (store.probeWrite && faults.probeDue()) {
    let timer: ReturnType<typeof setTimeout> | undefined
    await Promise.race([
      store.probeWrite().catch(() => {}), // its outcome is recorded in writeFaults
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, deadlineMs)
      }),
    ])
    clearTimeout(timer)
  }
  return faults.failing
}

/** True when the store answers a trivial query within `deadlineMs`. */
export async function storeAnswers(
  store: Pick<Store, 'ping'>,
  deadlineMs = STORE_HEALTH_DEADLINE_MS,
): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const deadline = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), deadlineMs)
  })
  try {
    return await Promise.race([
      store.ping().then(
        () => true,
        () => false,
      ),
      deadline,
    ])
  } finally {
    clearTimeout(timer)
  }
}
