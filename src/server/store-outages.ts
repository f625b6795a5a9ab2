// How `serve` behaves while its store cannot be reached: a request that needs the store is answered
// 503 {"error": "store unavailable"} with Retry-After (never a 500), the outage is logged once when it
// starts (error) and once when the store answers again (info), and /healthz says whether the store
// answers a trivial query within a short deadline. Nothing needs restarting: the driver reconnects.
import type { Logger } from '../shared/log.ts'
import { HttpError } from './http-error.ts'
import type { Store } from './store/types.ts'

/** What a 503 tells the client to wait before it tries again. */
export const STORE_RETRY_AFTER_SECONDS = 5
/** How long /healthz waits for the store's answer before it reports the store unavailable. */
export const STORE_HEALTH_DEADLINE_MS = 2_000

export function storeUnavailable(): HttpError {
  return new HttpError(503, 'store unavailable', { 'retry-after': String(STORE_RETRY_AFTER_SECONDS) })
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
