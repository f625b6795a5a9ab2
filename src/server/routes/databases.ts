// /api/v1/databases: the organization's registered databases (list, create, get, patch, delete,
// health, availability, and every database's health with its latest diagnosis at once). Status comes with
// availability: a database the agent reports down is disconnected with the cause (views.ts availabilityView),
// and each answer of the list carries its up time over 30 days (uptime.ts). Unverified organizations may register one database.
// Collection settings (poll interval, plans, replication, disabled collectors) are the owners': a member
// may rename a database, change its address and tags, but not change what is collected (403). API keys
// need `admin` to register, change or delete a database and `read` to read one (auth/scopes.ts).
import { Elysia, t } from 'elysia'
import { collectorsFor } from '../../shared/collectors.ts'
import { authenticate, requireOwner } from '../auth/principal.ts'
import type { Deps } from '../context.ts'
import { badRequest, conflict, forbidden, notFound } from '../http-error.ts'
import { databaseDefaults, fieldLimits, unverifiedDatabaseLimit } from '../limits.ts'
import { UniqueViolation } from '../store/driver.ts'
import type { DatabasePatch, Engine, RegisteredDatabase } from '../store/types.ts'
import { availabilityView, databaseView, rfc3339 } from '../views.ts'
import { type UptimeFigures, uptime, uptimeInput, uptimeTotal } from '../uptime.ts'
import { NoContent } from '../../shared/api/common.ts'
import { errorAnswers, ownersOnly } from '../openapi.ts'
import { Database, DatabaseAvailability, DatabaseHealth, DatabaseStatus } from '../../shared/api/databases.ts'
import { body, boolean, integer, oneOf, pathId, query, requiredString } from './schema.ts'

const DAY = 86_400_000
/** GET /databases/{id}/availability: days of history, default and maximum. */
const AVAILABILITY_DAYS = { default: 30, max: 90 }

/** The list's 30-day fields from the figures. */
const thirtyDays = (f: UptimeFigures) => ({ availability_30d: f.ratio, availability_30d_watched_ms: f.watched_ms })

const engines = ['postgres', 'clickhouse'] as const

const tags = t.Record(
  t.String({ maxLength: fieldLimits.tagKey }),
  t.String({ maxLength: fieldLimits.tagValue, pattern: '^[^\\u0000]*$' }),
  {
    maxProperties: fieldLimits.tags,
    error: `tags must be an object of at most ${fieldLimits.tags} string values`,
  },
)

function checkCollectors(engine: Engine, names: string[] | undefined) {
  if (!names) return
  const known = collectorsFor(engine)
  const unknown = names.filter((n) => !known.includes(n))
  if (unknown.length > 0) {
    throw badRequest(`disabled_collectors: unknown ${engine} collector "${unknown[0]}" (known: ${known.join(', ')})`)
  }
}

/** Tag keys: TypeBox does not apply a Record's key schema to lengths, so they are checked here. */
function checkTags(value: Record<string, string> | undefined) {
  for (const key of Object.keys(value ?? {})) {
    if (key.length === 0 || key.length > fieldLimits.tagKey || key.includes('\0')) {
      throw badRequest(`tags: keys must be 1 to ${fieldLimits.tagKey} characters`)
    }
  }
}

/** The PATCH fields that decide what the agent collects: owners only. */
// The name is one of them: an agent reports under its configured name, so a database renamed away from it
// is registered again under that name with the default settings (plans on, every collector), which would
// undo what an owner had switched off.
const COLLECTION_SETTINGS = [
  'poll_interval_seconds',
  'collect_explain_plans',
  'collect_replication',
  'disabled_collectors',
  'name',
] as const

export const SETTINGS_OWNERS_ONLY =
  "only an owner can change collection settings (poll_interval_seconds, collect_explain_plans, collect_replication, disabled_collectors) or the name, which the agent's settings follow"

/** The collection settings (the name included) `patch` would change on `db` (the same value again is no change). */
function changedSettings(db: RegisteredDatabase, patch: DatabasePatch): string[] {
  return COLLECTION_SETTINGS.filter((field) => {
    const value = patch[field]
    if (value === undefined) return false
    if (field === 'disabled_collectors') {
      const now = new Set(db.disabled_collectors)
      const next = new Set(value as string[])
      return now.size !== next.size || [...next].some((n) => !now.has(n))
    }
    return value !== db[field]
  })
}

function nameTaken(name: string) {
  return conflict(`a database named "${name}" already exists in this organization`)
}

export function databaseRoutes(deps: Deps) {
  const { store, clock } = deps

  const load = async (orgId: string, id: string): Promise<RegisteredDatabase> => {
    const db = await store.getDatabase(orgId, pathId(id, 'database'))
    if (!db) throw notFound('database')
    return db
  }

  return (
    new Elysia({ prefix: '/api/v1/databases' })
      .derive(async ({ request }) => ({ principal: await authenticate(deps, request) }))
      .get(
        '/',
        async ({ principal }) => {
          const now = clock()
          const [list, states, spans] = await Promise.all([
            store.listDatabases(principal.orgId),
            store.databaseAvailability.states(principal.orgId),
            store.databaseAvailability.orgSpans(principal.orgId, now - 30 * DAY),
          ])
          return list.map((db) => {
            const state = states.get(db.id)
            return databaseView(db, now, state, uptimeTotal(uptimeInput(db, state, spans.get(db.id), now), 30))
          })
        },
        { response: { 200: t.Array(Database) }, detail: { summary: "The organization's registered databases" } },
      )
      .post(
        '/',
        async ({ principal, body, set }) => {
          checkTags(body.tags)
          const org = await store.getOrganization(principal.orgId)
          const limit = org?.verified ? undefined : unverifiedDatabaseLimit
          let created
          try {
            created = await store.createDatabase(
              principal.orgId,
              {
                name: body.name.trim(),
                engine: body.engine,
                engine_version: body.engine_version ?? null,
                host: body.host.trim(),
                port: body.port ?? databaseDefaults.ports[body.engine],
                tags: body.tags ?? {},
              },
              clock(),
              limit,
            )
          } catch (e) {
            if (e instanceof UniqueViolation) throw nameTaken(body.name.trim())
            throw e
          }
          if (created === 'limit') {
            throw forbidden(
              `unverified organizations can register ${unverifiedDatabaseLimit} database; verify your email address to register more`,
            )
          }
          set.status = 201
          return databaseView(created, clock())
        },
        {
          body: body({
            name: requiredString('name', fieldLimits.name),
            engine: oneOf('engine', engines),
            host: requiredString('host', fieldLimits.host),
            engine_version: t.Optional(
              t.String({ maxLength: fieldLimits.engineVersion, error: 'engine_version must be a string' }),
            ),
            port: t.Optional(integer('port', 1, 65535)),
            tags: t.Optional(tags),
          }),
          response: { 201: Database },
          detail: {
            summary: 'Register a database (the agent also registers one by its first batch)',
            responses: errorAnswers({
              403: 'an unverified organization has its one database already',
              409: 'the name is taken in the organization',
            }),
          },
        },
      )
      // Every database's connection status and latest diagnosis in one answer (the database list polls it):
      // each database's latest diagnosis (doctor/current.ts: the monitor's, about once a minute, or a page's
      // since) is read from the store, the one the overview and the doctor show, so this reads instead of diagnosing.
      .get(
        '/health',
        async ({ principal }) => {
          const now = clock()
          const [databases, diagnoses, states, spans] = await Promise.all([
            store.listDatabases(principal.orgId),
            store.diagnoses.diagnosisSummaries(principal.orgId),
            store.databaseAvailability.states(principal.orgId),
            store.databaseAvailability.orgSpans(principal.orgId, now - 30 * DAY),
          ])
          const byId = new Map(diagnoses.map((d) => [d.database_id, d]))
          return databases.map((db) => {
            const d = byId.get(db.id)
            const state = states.get(db.id)
            return {
              id: db.id,
              name: db.name,
              last_seen_at: rfc3339(db.last_seen_at),
              ...availabilityView(db, state, now),
              ...thirtyDays(uptimeTotal(uptimeInput(db, state, spans.get(db.id), now), 30)),
              health_score: d?.score ?? null,
              doctor_status: d?.status ?? null,
              findings: d?.findings ?? null,
              active_queries: d?.active_queries ?? null,
              evaluated_at: rfc3339(d?.evaluated_at ?? null),
            }
          })
        },
        {
          response: { 200: t.Array(DatabaseHealth) },
          detail: { summary: "Every database's connection status and latest diagnosis" },
        },
      )
      .get(
        '/:id',
        async ({ principal, params }) => {
          const db = await load(principal.orgId, params.id)
          const now = clock()
          const [state, spans] = await Promise.all([
            store.databaseAvailability.state(db.id),
            store.databaseAvailability.spans(db.id, now - 30 * DAY),
          ])
          return databaseView(db, now, state, uptimeTotal(uptimeInput(db, state, spans, now), 30))
        },
        {
          response: { 200: Database },
          detail: { summary: 'One database' },
        },
      )
      .patch(
        '/:id',
        async ({ principal, params, body }) => {
          const db = await load(principal.orgId, params.id)
          checkCollectors(db.engine, body.disabled_collectors)
          checkTags(body.tags)
          const patch: DatabasePatch = {
            ...body,
            name: body.name?.trim(),
            host: body.host?.trim(),
            disabled_collectors: body.disabled_collectors ? [...new Set(body.disabled_collectors)] : undefined,
          }
          // A member may not change what is collected (an owner turned plans off, say); keys got here with `admin`.
          const changed = changedSettings(db, patch)
          if (changed.length > 0 && principal.kind === 'user' && principal.role !== 'owner')
            throw forbidden(`${SETTINGS_OWNERS_ONLY}: ${changed.join(', ')}`)
          let updated
          try {
            updated = await store.updateDatabase(principal.orgId, db.id, patch, clock())
          } catch (e) {
            if (e instanceof UniqueViolation) throw nameTaken(patch.name ?? db.name)
            throw e
          }
          if (!updated) throw notFound('database')
          return databaseView(updated, clock())
        },
        {
          body: body({
            name: t.Optional(requiredString('name', fieldLimits.name)),
            host: t.Optional(requiredString('host', fieldLimits.host)),
            port: t.Optional(integer('port', 1, 65535)),
            tags: t.Optional(tags),
            poll_interval_seconds: t.Optional(integer('poll_interval_seconds', 1, fieldLimits.pollIntervalMaxSeconds)),
            collect_explain_plans: t.Optional(boolean('collect_explain_plans')),
            collect_replication: t.Optional(boolean('collect_replication')),
            disabled_collectors: t.Optional(
              t.Array(t.String({ maxLength: 64 }), {
                maxItems: 64,
                error: 'disabled_collectors must be an array of collector names',
              }),
            ),
          }),
          response: { 200: Database },
          detail: {
            summary:
              "Change a database's name, address, tags or collection settings (the agent applies them from its next batch); collection settings are owners' only",
            responses: errorAnswers({
              403: 'a member changing a collection setting (owners only)',
              409: 'the name is taken in the organization',
            }),
          },
        },
      )
      .delete(
        '/:id',
        async ({ principal, params, set }) => {
          // All of a database's history goes with it: an owner's decision (or an `admin` key's: scopes.ts).
          requireOwner(principal, 'delete a database')
          if (!(await store.deleteDatabase(principal.orgId, pathId(params.id, 'database')))) throw notFound('database')
          set.status = 204
        },
        {
          response: { 204: NoContent },
          detail: {
            summary: "Delete a database and all its data (owners, and API keys with the 'admin' scope)",
            responses: ownersOnly('delete a database'),
          },
        },
      )
      .get(
        '/:id/health',
        async ({ principal, params }) => {
          const db = await load(principal.orgId, params.id)
          const state = await store.databaseAvailability.state(db.id)
          return { id: db.id, last_seen_at: rfc3339(db.last_seen_at), ...availabilityView(db, state, clock()) }
        },
        {
          response: { 200: DatabaseStatus },
          detail: { summary: "A database's connection status: down with its cause, the agent silent, or connected" },
        },
      )
      .get(
        '/:id/availability',
        async ({ principal, params, query }) => {
          const db = await load(principal.orgId, params.id)
          const now = clock()
          const days = Math.min(
            query.days === undefined ? AVAILABILITY_DAYS.default : Number(query.days),
            AVAILABILITY_DAYS.max,
          )
          const [state, spans] = await Promise.all([
            store.databaseAvailability.state(db.id),
            store.databaseAvailability.spans(db.id, now - days * DAY),
          ])
          const figures = uptime(uptimeInput(db, state, spans, now), days)
          return {
            id: db.id,
            ...availabilityView(db, state, now),
            days: figures.days,
            total: figures.total,
            outages: spans.outages.map((o) => ({
              started_at: rfc3339(o.started_at),
              ended_at: rfc3339(o.ended_at),
              cause: o.cause,
              message: o.message,
            })),
          }
        },
        {
          query: query({
            days: t.Optional(
              t.String({
                pattern: '^0*[1-9][0-9]{0,19}$',
                error: `days must be a whole number from 1 (at most ${AVAILABILITY_DAYS.max} are returned)`,
                description: `days of history (default ${AVAILABILITY_DAYS.default}; a larger value returns ${AVAILABILITY_DAYS.max})`,
              }),
            ),
          }),
          response: { 200: DatabaseAvailability },
          detail: {
            summary: `Up time per UTC day and in all over \`days\` (default ${AVAILABILITY_DAYS.default}, at most ${AVAILABILITY_DAYS.max}), and the outages`,
          },
        },
      )
  )
}
