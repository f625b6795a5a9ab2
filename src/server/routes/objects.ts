// /api/v1/databases/{id}: active queries (and their WebSocket stream), locks, tables and indexes.
import { Elysia } from 'elysia'
import { authenticate } from '../auth/principal.ts'
import type { Deps } from '../context.ts'

export function objectRoutes(deps: Deps) {
  return new Elysia({ prefix: '/api/v1/databases/:id' }).derive(async ({ request }) => ({ principal: await authenticate(deps, request) }))
}
