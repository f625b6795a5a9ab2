// /api/v1/databases/{id}: waits, replication (+ history, slot history), bgwriter, wal-stats, io-stats.
import { Elysia } from 'elysia'
import { authenticate } from '../auth/principal.ts'
import type { Deps } from '../context.ts'

export function internalsRoutes(deps: Deps) {
  return new Elysia({ prefix: '/api/v1/databases/:id' }).derive(async ({ request }) => ({ principal: await authenticate(deps, request) }))
}
