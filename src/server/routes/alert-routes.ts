// /api/v1/organization/alert-routes: an organization's ordered list of alert routes. Each has matchers
// (severity, rule, database_id: any of the values listed; tag: every key=value given; none: every
// alert), the destinations it sends to, whether later routes are tried after it matched (`continue`),
// and a repeat interval for alerts still open (at least 5 minutes; null: none). An alert goes to the
// destinations of the first route that matches, then of each later one while `continue`; with no
// routes, every enabled destination gets every alert (alerts/routing.ts). Owners manage them (API keys
// with the admin scope); members get 403, another organization's route is a 404. A route names only
// the organization's destinations and databases (400 otherwise); a destination deleted leaves its routes.
import { Elysia, t } from 'elysia'
import { authenticate, requireOwner } from '../auth/principal.ts'
import type { Deps } from '../context.ts'
import { badRequest, conflict, notFound } from '../http-error.ts'
import { alertRoutingLimits, fieldLimits } from '../limits.ts'
import type { AlertRoute, RouteMatch } from '../store/alerts/routing.ts'
import { rfc3339 } from '../views.ts'
import { AlertRoute as RouteSchema } from '../../shared/api/alert-routing.ts'
import { NoContent } from '../../shared/api/common.ts'
import { errorAnswers, ownersOnly } from '../openapi.ts'
import { body, boolean, oneOf, pathId, requiredString } from './schema.ts'

const OWNERS = ownersOnly('manage alert routes')
const NOT_FOUND = errorAnswers({ 404: 'no such route in the organization' })
const L = alertRoutingLimits

function routeView(r: AlertRoute) {
  return {
    id: r.id,
    position: r.position,
    name: r.name,
    match: r.match,
    destinations: r.destinations,
    continue: r.continue,
    repeat_interval_s: r.repeat_interval_s,
    created_at: rfc3339(r.created_at),
    updated_at: rfc3339(r.updated_at),
  }
}

const list = <T extends Parameters<typeof t.Array>[0]>(field: string, item: T) =>
  t.Optional(
    t.Array(item, {
      minItems: 1,
      maxItems: L.matchValues,
      error: `${field} must be a list of 1 to ${L.matchValues} values`,
    }),
  )

const matchSchema = t.Object(
  {
    severity: list('match.severity', oneOf('match.severity', ['critical', 'warning', 'info'] as const)),
    rule: list('match.rule', requiredString('match.rule', L.matchTextMax)),
    database_id: list('match.database_id', requiredString('match.database_id', 64)),
    tag: t.Optional(
      t.Record(t.String({ minLength: 1, maxLength: L.matchTextMax }), t.String({ maxLength: L.matchTextMax }), {
        minProperties: 1,
        maxProperties: L.matchValues,
        error: `match.tag must be an object of 1 to ${L.matchValues} tag keys and their values (strings of at most ${L.matchTextMax} characters)`,
      }),
    ),
  },
  { additionalProperties: false, error: 'match may hold only severity, rule, database_id and tag' },
)

const routeFields = {
  name: requiredString('name', fieldLimits.name),
  match: t.Optional(matchSchema),
  destinations: t.Array(requiredString('destinations', 64), {
    maxItems: L.matchValues,
    error: `destinations must be a list of at most ${L.matchValues} destination ids`,
  }),
  continue: t.Optional(boolean('continue')),
  repeat_interval_s: t.Optional(
    t.Union([t.Integer({ minimum: L.repeatMinS, maximum: L.repeatMaxS }), t.Null()], {
      error: `repeat_interval_s must be null or a whole number of seconds from ${L.repeatMinS} to ${L.repeatMaxS}`,
    }),
  ),
}

export function alertRouteRoutes(deps: Deps) {
  const { store, clock } = deps
  const routing = store.alertRouting
  const owner = (principal: Parameters<typeof requireOwner>[0]) => requireOwner(principal, 'manage alert routes')
  const find = async (orgId: string, id: string) => {
    const r = await routing.getRoute(orgId, pathId(id, 'alert route'))
    if (!r) throw notFound('alert route')
    return r
  }
  /** The destinations, each one of the organization's (400 otherwise), once each in their order. */
  const checkedDestinations = async (orgId: string, ids: string[]) => {
    for (const id of ids) {
      const ok =
        /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id) &&
        (await store.alertDestinations.getDestination(orgId, id))
      if (!ok)
        throw badRequest(
          `destinations: ${JSON.stringify(id.slice(0, 64))} is not an alert destination of the organization`,
        )
    }
    return [...new Set(ids)]
  }
  /** The matchers, their databases each one of the organization's (400 otherwise). */
  const checkedMatch = async (orgId: string, match: RouteMatch | undefined): Promise<RouteMatch | undefined> => {
    if (!match) return undefined
    for (const id of match.database_id ?? []) {
      const ok =
        /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id) &&
        (await store.getDatabase(orgId, id))
      if (!ok)
        throw badRequest(`match.database_id: ${JSON.stringify(id.slice(0, 64))} is not a database of the organization`)
    }
    const out: RouteMatch = {}
    if (match.severity) out.severity = [...new Set(match.severity)]
    if (match.rule) out.rule = [...new Set(match.rule)]
    if (match.database_id) out.database_id = [...new Set(match.database_id)]
    if (match.tag) out.tag = { ...match.tag }
    return out
  }
  return new Elysia()
    .derive(async ({ request }) => ({ principal: await authenticate(deps, request) }))
    .get(
      '/api/v1/organization/alert-routes',
      async ({ principal }) => {
        owner(principal)
        return (await routing.listRoutes(principal.orgId)).map(routeView)
      },
      {
        response: { 200: t.Array(RouteSchema) },
        detail: { summary: "The organization's alert routes in their order", responses: OWNERS },
      },
    )
    .post(
      '/api/v1/organization/alert-routes',
      async ({ principal, body, set }) => {
        owner(principal)
        if ((await routing.listRoutes(principal.orgId)).length >= L.routesPerOrganization)
          throw conflict(`an organization has at most ${L.routesPerOrganization} alert routes`)
        const created = await routing.createRoute({
          id: Bun.randomUUIDv7(),
          org_id: principal.orgId,
          name: body.name,
          match: (await checkedMatch(principal.orgId, body.match)) ?? {},
          destinations: await checkedDestinations(principal.orgId, body.destinations),
          continue: body.continue ?? false,
          repeat_interval_s: body.repeat_interval_s ?? null,
          created_at: clock(),
        })
        set.status = 201
        return routeView(created)
      },
      {
        body: body(routeFields, {
          examples: [
            { name: 'critical alerts', match: { severity: ['critical'] }, destinations: [], repeat_interval_s: 3600 },
          ],
        }),
        response: { 201: RouteSchema },
        detail: {
          summary:
            'Add an alert route at the end of the list: alerts matching it go to its destinations (and to later routes only with continue)',
          responses: { ...OWNERS, ...errorAnswers({ 409: 'the organization has the most routes it may' }) },
        },
      },
    )
    .get(
      '/api/v1/organization/alert-routes/:id',
      async ({ principal, params }) => {
        owner(principal)
        return routeView(await find(principal.orgId, params.id))
      },
      {
        response: { 200: RouteSchema },
        detail: { summary: 'One alert route', responses: { ...OWNERS, ...NOT_FOUND } },
      },
    )
    .patch(
      '/api/v1/organization/alert-routes/:id',
      async ({ principal, params, body }) => {
        owner(principal)
        const current = await find(principal.orgId, params.id)
        const updated = await routing.updateRoute(
          principal.orgId,
          current.id,
          {
            name: body.name,
            match: await checkedMatch(principal.orgId, body.match),
            destinations:
              body.destinations === undefined
                ? undefined
                : await checkedDestinations(principal.orgId, body.destinations),
            continue: body.continue,
            repeat_interval_s: body.repeat_interval_s,
            position: body.position,
          },
          clock(),
        )
        if (!updated) throw notFound('alert route')
        return routeView(updated)
      },
      {
        body: body(
          {
            ...routeFields,
            name: t.Optional(routeFields.name),
            destinations: t.Optional(routeFields.destinations),
            position: t.Optional(
              t.Integer({ minimum: 0, maximum: 1000, error: 'position must be a whole number from 0 (first) to 1000' }),
            ),
          },
          { examples: [{ position: 0 }] },
        ),
        response: { 200: RouteSchema },
        detail: {
          summary:
            "Change an alert route's name, matchers, destinations, continue or repeat interval, or move it (position, from 0)",
          responses: { ...OWNERS, ...NOT_FOUND },
        },
      },
    )
    .delete(
      '/api/v1/organization/alert-routes/:id',
      async ({ principal, params, set }) => {
        owner(principal)
        const current = await find(principal.orgId, params.id)
        if (!(await routing.deleteRoute(principal.orgId, current.id))) throw notFound('alert route')
        set.status = 204
      },
      {
        response: { 204: NoContent },
        detail: { summary: 'Remove an alert route', responses: { ...OWNERS, ...NOT_FOUND } },
      },
    )
}
