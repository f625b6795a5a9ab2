// The options of the HTTP server `dbm serve` listens with, which the app (createApp, for tests' listen)
// and serve.ts (its own listener) both give Bun.serve.
// - Every body reaches the app, which refuses one over its route's cap (app.ts, readBody): Bun's own
//   limit would answer 413 with an empty body and no hook to give it one.
// - `development: false` keeps Bun's dev server (hot reload, error overlays) out of every build.
/** Seconds after which Bun closes a connection that sent and received nothing (Elysia's listen has the same). */
export const IDLE_TIMEOUT_S = 30

export const serverOptions = { maxRequestBodySize: Number.MAX_SAFE_INTEGER, development: false } as const
