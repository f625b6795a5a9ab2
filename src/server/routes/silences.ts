// /api/v1/organization/silences: silences of an organization's alerts. A silence matches a database
// (database_id), a rule, one alert or finding (key), or a database tag (tag "key=value"); every matcher
// given must match, and at least one is given. It lasts from starts_at (default now; later: a
// maintenance window) to ends_at (required, at most 90 days from now). While one matches an open alert,
// no notification of it goes anywhere (alerts/routing.ts, monitor/notifications.ts); when it ends with the
// alert still open, the held notification goes then. Members may set and expire silences, owners too
// (an API key needs the admin scope); DELETE expires one at once and keeps it (?state=expired lists it).
import { Elysia, t } from 'elysia'
import { authenticate } from '../auth/principal.ts'
import type { Deps } from '../context.ts'
import { badRequest, conflict, notFound } from '../http-error.ts'
import { alertRoutingLimits } from '../limits.ts'
import type { Silence } from '../store/alerts/routing.ts'
import type { SilenceAuthor } from '../alerts/routing.ts'
import { rfc3339 } from '../views.ts'
import { Silence as SilenceSchema } from '../../shared/api/alert-routing.ts'
import { NoContent } from '../../shared/api/common.ts'
import { errorAnswers } from '../openapi.ts'
import { body, oneOf, pathId, query, requiredString } from './schema.ts'
import { clampLimit, limitQuery } from './telemetry-params.ts'

const NOT_FOUND = errorAnswers({ 404: 'no such silence in the organization' })
const STATES = ['active', 'expired', 'all'] as const
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/i
const MATCHERS = 'database_id, rule, key or tag'

/** A silence's author with its name (the user's name and email, the API key's name; null once removed). */
export type NamedAuthor = SilenceAuthor & { name: string | null }

/**
 * Names the authors of the organization's silences: its members and its API keys (revoked ones too),
 * read once, when a silence is to be shown.
 */
export function authorNames(deps: Pick<Deps, 'store'>, orgId: string): (a: SilenceAuthor) => Promise<NamedAuthor> {
  let known: Promise<Map<string, string>> | undefined
  const load = async () => {
    const [users, keys] = await Promise.all([
      deps.store.members.listMembers(orgId),
      deps.store.listApiKeys(orgId, true),
    ])
    return new Map<string, string>([
      ...users.map((u) => [`user:${u.id}`, `${u.name} (${u.email})`] as const),
      ...keys.map((k) => [`api_key:${k.id}`, `API key "${k.name}"`] as const),
    ])
  }
  return async (a) => ({ ...a, name: (await (known ??= load())).get(`${a.kind}:${a.id}`) ?? null })
}

export function silenceView(s: Silence, now: number, by: NamedAuthor) {
  return {
    id: s.id,
    status: now >= s.ends_at ? ('expired' as const) : now < s.starts_at ? ('scheduled' as const) : ('active' as const),
    database_id: s.database_id,
    rule: s.rule,
    key: s.key,
    tag: s.tag === null ? null : `${s.tag.key}=${s.tag.value}`,
    comment: s.comment,
    created_by: by,
    created_at: rfc3339(s.created_at),
    starts_at: rfc3339(s.starts_at),
    ends_at: rfc3339(s.ends_at),
    expired_early_at: rfc3339(s.expired_early_at),
  }
}

/** An RFC 3339 time as epoch milliseconds; a 400 naming the field otherwise. */
function time(field: string, value: string): number {
  const ms = RFC3339.test(value) ? Date.parse(value) : Number.NaN
  if (!Number.isFinite(ms)) throw badRequest(`${field} must be an RFC 3339 time, such as 2026-11-30T22:00:00Z`)
  return ms
}

const text = (field: string) => t.Optional(requiredString(field, alertRoutingLimits.matchTextMax))

export function silenceRoutes(deps: Deps) {
  const { store, clock } = deps
  const routing = store.alertRouting
  return new Elysia()
    .derive(async ({ request }) => ({ principal: await authenticate(deps, request) }))
    .get(
      '/api/v1/organization/silences',
      async ({ principal, query }) => {
        const now = clock()
        const named = authorNames(deps, principal.orgId)
        const silences = await routing.listSilences(
          principal.orgId,
          query.state ?? 'active',
          now,
          clampLimit('silences', query.limit),
        )
        return Promise.all(silences.map(async (s) => silenceView(s, now, await named(s.created_by))))
      },
      {
        query: query({ state: t.Optional(oneOf('state', STATES)), limit: limitQuery('silences') }),
        response: { 200: t.Array(SilenceSchema) },
        detail: {
          summary:
            "The organization's silences, the latest created first: not yet ended (state=active, the default: in effect or scheduled), ended (expired), or all",
        },
      },
    )
    .post(
      '/api/v1/organization/silences',
      async ({ principal, body, set }) => {
        const now = clock()
        const { database_id, rule, key, tag, comment } = body
        if (database_id === undefined && rule === undefined && key === undefined && tag === undefined)
          throw badRequest(`a silence needs at least one matcher: ${MATCHERS}`)
        let tagPair: { key: string; value: string } | null = null
        if (tag !== undefined) {
          const at = tag.indexOf('=')
          if (at <= 0) throw badRequest('tag must be key=value, such as env=production')
          tagPair = { key: tag.slice(0, at), value: tag.slice(at + 1) }
        }
        if (database_id !== undefined) {
          const id = pathId(database_id, 'database')
          if (!(await store.getDatabase(principal.orgId, id)))
            throw badRequest('database_id names no database of the organization')
        }
        const starts = body.starts_at === undefined ? now : time('starts_at', body.starts_at)
        const ends = time('ends_at', body.ends_at)
        if (ends <= Math.max(starts, now)) throw badRequest('ends_at must be later than starts_at and than now')
        if (ends - now > alertRoutingLimits.silenceMaxMs)
          throw badRequest(`ends_at must be at most ${alertRoutingLimits.silenceMaxMs / 86_400_000} days from now`)
        if (
          (await routing.countActiveSilences(principal.orgId, now)) >= alertRoutingLimits.activeSilencesPerOrganization
        ) {
          throw conflict(
            `an organization has at most ${alertRoutingLimits.activeSilencesPerOrganization} silences not yet ended`,
          )
        }
        const created = await routing.createSilence({
          id: Bun.randomUUIDv7(),
          org_id: principal.orgId,
          database_id: database_id ?? null,
          rule: rule ?? null,
          key: key ?? null,
          tag: tagPair,
          comment,
          created_by:
            principal.kind === 'user'
              ? { kind: 'user', id: principal.userId }
              : { kind: 'api_key', id: principal.apiKeyId },
          created_at: now,
          starts_at: starts,
          ends_at: ends,
        })
        deps.log.info('silence created', { org: principal.orgId, silence: created.id, by: created.created_by.id })
        set.status = 201
        return silenceView(created, now, await authorNames(deps, principal.orgId)(created.created_by))
      },
      {
        body: body(
          {
            database_id: t.Optional(requiredString('database_id', 64)),
            rule: text('rule'),
            key: text('key'),
            tag: text('tag'),
            starts_at: t.Optional(requiredString('starts_at', 64)),
            ends_at: requiredString('ends_at', 64),
            comment: requiredString('comment', alertRoutingLimits.commentMax),
          },
          {
            examples: [
              {
                rule: 'pg_replication_lag',
                starts_at: '2026-12-31T22:00:00Z',
                ends_at: '2027-01-01T02:00:00Z',
                comment: 'replica rebuilt overnight',
              },
            ],
          },
        ),
        response: { 201: SilenceSchema },
        detail: {
          summary:
            'Silence alerts: by database_id, rule, key (an alert or finding) or tag (key=value), each given matching; from starts_at (default now) to ends_at (at most 90 days on)',
          responses: errorAnswers({ 409: 'the organization has the most silences not yet ended that it may' }),
        },
      },
    )
    .delete(
      '/api/v1/organization/silences/:id',
      async ({ principal, params, set }) => {
        const now = clock()
        const expired = await routing.expireSilence(principal.orgId, pathId(params.id, 'silence'), now)
        if (!expired) throw notFound('silence')
        deps.log.info('silence expired', {
          org: principal.orgId,
          silence: expired.id,
          by: principal.kind === 'user' ? principal.userId : principal.apiKeyId,
        })
        set.status = 204
      },
      {
        response: { 204: NoContent },
        detail: {
          summary:
            'Expire a silence now (it stays listed under state=expired); held notifications of alerts still open go then',
          responses: NOT_FOUND,
        },
      },
    )
}
