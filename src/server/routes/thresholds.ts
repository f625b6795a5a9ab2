// /api/v1/databases/{id}/thresholds: the doctor's thresholds of one database. GET answers every rule of
// its engine with each threshold's default, the database's value and its range (members and `read` keys);
// PUT sets the keys it names, null taking one back to its default, the others kept (owners and `admin`
// keys); DELETE takes every value away. A change is checked whole (doctor/thresholds.ts): an unknown rule
// or key, a value out of range or a warning put past its critical is a 400 naming it, and nothing is
// stored. The next diagnosis applies them: the stored one is stale from the change (doctor/current.ts).
import { Elysia } from 'elysia'
import { authenticate, requireOwner } from '../auth/principal.ts'
import type { Deps } from '../context.ts'
import { checkRequest, rulesOfEngine, thresholdEntries } from '../doctor/thresholds.ts'
import { badRequest } from '../http-error.ts'
import type { RegisteredDatabase } from '../store/types.ts'
import { rfc3339 } from '../views.ts'
import { NoContent } from '../../shared/api/common.ts'
import { DatabaseThresholds, ThresholdsChange } from '../../shared/api/thresholds.ts'
import { errorAnswers, ownersOnly } from '../openapi.ts'
import { databaseFor } from './telemetry-params.ts'

const CHANGE = "change the doctor's thresholds"

export function thresholdRoutes(deps: Deps) {
  const { store, clock } = deps

  /** The database's thresholds, by rule in the doctor's order. */
  const view = async (db: RegisteredDatabase) => {
    const entries = thresholdEntries(db.engine, await store.thresholds.databaseThresholds(db.id))
    const rules = rulesOfEngine(db.engine)
      .map((rule) => ({
        rule: rule.id,
        category: rule.category,
        summary: rule.summary,
        thresholds: entries
          .filter((e) => e.rule === rule.id)
          .map(({ rule: _rule, updated_at, ...e }) => ({ ...e, updated_at: rfc3339(updated_at) })),
      }))
      .filter((r) => r.thresholds.length > 0)
    return { database_id: db.id, rules }
  }

  return new Elysia({ prefix: '/api/v1/databases' })
    .derive(async ({ request }) => ({ principal: await authenticate(deps, request) }))
    .get('/:id/thresholds', async ({ principal, params }) => view(await databaseFor(deps, principal, params.id)), {
      response: { 200: DatabaseThresholds },
      detail: {
        summary: "The doctor's thresholds of a database: each rule's defaults, the database's values and their ranges",
      },
    })
    .put(
      '/:id/thresholds',
      async ({ principal, params, body }) => {
        const db = await databaseFor(deps, principal, params.id)
        requireOwner(principal, CHANGE)
        const checked = checkRequest(db.engine, await store.thresholds.databaseThresholds(db.id), body.thresholds)
        if ('error' in checked) throw badRequest(checked.error)
        await store.thresholds.changeThresholds(db.id, checked.changes, clock())
        return view(db)
      },
      {
        body: ThresholdsChange,
        response: { 200: DatabaseThresholds },
        detail: {
          summary:
            "Set some of a database's thresholds (null: back to the default; keys not named keep their value); the next diagnosis applies them",
          responses: {
            ...ownersOnly(CHANGE),
            ...errorAnswers({
              400: 'an unknown rule or key, a value of the wrong kind or out of range, or a warning past its critical',
            }),
          },
        },
      },
    )
    .delete(
      '/:id/thresholds',
      async ({ principal, params, set }) => {
        const db = await databaseFor(deps, principal, params.id)
        requireOwner(principal, CHANGE)
        await store.thresholds.clearThresholds(db.id)
        set.status = 204
      },
      {
        response: { 204: NoContent },
        detail: {
          summary: "Take every threshold of a database back to the rules' defaults",
          responses: ownersOnly(CHANGE),
        },
      },
    )
}
