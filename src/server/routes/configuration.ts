// GET /api/v1/databases/{id}/configuration: the monitored server's settings as PgHero's settings page
// and pganalyze's configuration view show them. The values are the ones the agent last sent (SHOW's
// text, secrets masked); the details (unit, source with file and line, built-in default, context,
// pending restart, changed from the default) come from agents that send them. Defaults are written in
// the value's form (boot_val 16384 with unit 8kB is `128MB`, as SHOW would print it), so a value and its
// default compare by eye. Each setting carries the doctor's word on it: the why of its risky-setting
// entry, and the current findings that name it. Query: changed=true|false, q=<text in name or
// description>. Both engines (ClickHouse: the settings changed from their defaults).
import { Elysia, t } from 'elysia'
import type { SettingDetail } from '../../shared/wire.ts'
import { authenticate } from '../auth/principal.ts'
import type { Deps } from '../context.ts'
import { DiagnosisBusy } from '../doctor/diagnosis-worker.ts'
import { currentDiagnosis } from '../doctor/current.ts'
import { SETTING_RISKS } from '../doctor/rules/setting-risks.ts'
import type { Finding } from '../doctor/types.ts'
import { rfc3339 } from '../views.ts'
import { Configuration } from '../../shared/api/configuration.ts'
import { oneOf, query } from './schema.ts'
import { databaseFor } from './telemetry-params.ts'

/** Bytes per memory unit PostgreSQL prints, largest first. */
const MEMORY_UNITS: [string, number][] = [
  ['TB', 1024 ** 4],
  ['GB', 1024 ** 3],
  ['MB', 1024 ** 2],
  ['kB', 1024],
  ['B', 1],
]
/** Milliseconds per time unit PostgreSQL prints, largest first. */
const TIME_UNITS: [string, number][] = [
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['min', 60_000],
  ['s', 1000],
  ['ms', 1],
  ['us', 0.001],
]

/** A pg_settings unit (`8kB`, `16MB`, `ms`, `min`) as its ladder and its size on it; undefined: no unit PostgreSQL scales. */
function unitScale(unit: string): { ladder: [string, number][]; size: number } | undefined {
  const m = /^(\d*)\s*(TB|GB|MB|kB|B|d|h|min|s|ms|us)$/.exec(unit.trim())
  if (!m) return undefined
  const factor = m[1] ? Number(m[1]) : 1
  for (const ladder of [MEMORY_UNITS, TIME_UNITS]) {
    const step = ladder.find(([name]) => name === m[2])
    if (step) return { ladder, size: factor * step[1] }
  }
  return undefined
}

/**
 * A raw setting (pg_settings' boot_val or reset_val, counted in `unit`) as SHOW prints it: the largest
 * unit that holds it whole (16384 × 8kB = `128MB`, 60 × s = `1min`); 0, negatives (-1: off) and
 * values that are not numbers stay as they are, as PostgreSQL prints them.
 */
export function showForm(raw: string | null, unit: string | null): string | null {
  if (raw === null || unit === null || unit === '') return raw
  const scale = unitScale(unit)
  const n = Number(raw)
  if (!scale || raw.trim() === '' || !Number.isFinite(n) || n <= 0) return raw
  const base = n * scale.size
  for (const [name, size] of scale.ladder) {
    const count = base / size
    if (count >= 1 && Math.abs(count - Math.round(count)) < 1e-9) return `${Math.round(count)}${name}`
  }
  const [smallest, size] = scale.ladder.at(-1)!
  return `${Number((base / size).toPrecision(6))}${smallest}`
}

/** pg_settings.context as what a change of the setting needs. */
const APPLIES: Record<string, string> = {
  postmaster: 'restart',
  sighup: 'reload',
  superuser: 'superuser (SET or reload)',
  'superuser-backend': 'superuser, new connection',
  backend: 'new connection',
  user: 'session (SET)',
  internal: 'fixed (read only)',
}

/** pg_settings.source (and its file) in the words a DBA uses. */
export function sourceLabel(d: Pick<SettingDetail, 'source' | 'file' | 'line'>): string {
  const file = d.file ?? null
  if (d.source === 'configuration file') {
    if (file === null) return 'configuration file'
    const name = file.split('/').at(-1) ?? file
    if (name === 'postgresql.auto.conf') return 'ALTER SYSTEM'
    return d.line === null || d.line === undefined ? name : `${name}:${d.line}`
  }
  const words: Record<string, string> = {
    database: 'ALTER DATABASE',
    user: 'ALTER ROLE',
    'database user': 'ALTER ROLE IN DATABASE',
    override: 'set by the server',
    'environment variable': 'environment variable',
    'command line': 'command line',
  }
  return words[d.source] ?? d.source
}

/** Whether a finding names the setting: among its objects, its key's object, or (a name with `_` or `.`) in its title or advice. */
export function findingNames(f: Pick<Finding, 'key' | 'objects' | 'title' | 'recommendation'>, name: string): boolean {
  if (f.objects.includes(name) || f.key.endsWith(`:${name}`)) return true
  if (!/[_.]/.test(name)) return false
  const word = new RegExp(`(^|[^A-Za-z0-9_.])${name.replace(/[.]/g, '\\.')}($|[^A-Za-z0-9_])`)
  return word.test(f.title) || word.test(f.recommendation)
}

const MAX_QUERY = 200

export function configurationRoutes(deps: Deps) {
  const { store } = deps
  return new Elysia({ prefix: '/api/v1/databases/:id' })
    .derive(async ({ request }) => ({ principal: await authenticate(deps, request) }))
    .get(
      '/configuration',
      async ({ principal, params, query }) => {
        const db = await databaseFor(deps, principal, params.id)
        const found = await store.serverSettings.serverSettings(db.id)
        let findings: Finding[] = []
        let findingsUnavailable = false
        try {
          findings = (await currentDiagnosis(deps, db, deps.clock())).findings
        } catch (e) {
          if (!(e instanceof DiagnosisBusy)) throw e
          findingsUnavailable = true
        }
        const values = found.values ?? {}
        const details = found.details ?? {}
        const risks = new Map(SETTING_RISKS.filter((r) => r.engine === db.engine).map((r) => [r.name, r]))
        const names = [...new Set([...Object.keys(values), ...Object.keys(details)])].sort()
        const all = names.map((name) => {
          const d: SettingDetail | undefined = details[name]
          const unit = d?.unit ?? null
          return {
            name,
            value: values[name] ?? '',
            unit,
            source: d?.source ?? null,
            source_label: d ? sourceLabel(d) : null,
            file: d?.file ?? null,
            line: d?.line ?? null,
            // ClickHouse's defaults are already in the value's form.
            default: db.engine === 'postgres' ? showForm(d?.boot_value ?? null, unit) : (d?.boot_value ?? null),
            reset_value: db.engine === 'postgres' ? showForm(d?.reset_value ?? null, unit) : (d?.reset_value ?? null),
            context: d?.context ?? null,
            applies: d?.context ? (APPLIES[d.context] ?? d.context) : null,
            type: d?.type ?? null,
            description: d?.description ?? null,
            pending_restart: d?.pending_restart === true,
            // ClickHouse sends only the changed ones; without details, a value is not known to differ.
            changed: d ? d.changed : db.engine === 'clickhouse',
            advice: risks.get(name)?.why ?? null,
            findings: findings
              .filter((f) => findingNames(f, name))
              .map((f) => ({ key: f.key, rule: f.rule, severity: f.severity, title: f.title })),
          }
        })
        const q = query.q?.trim().toLowerCase() ?? ''
        const wanted = query.changed === undefined ? undefined : query.changed === 'true'
        return {
          engine: db.engine,
          collected_at: found.details_at === null ? null : rfc3339(found.details_at),
          details: found.details !== null,
          total: all.length,
          changed: all.filter((s) => s.changed).length,
          pending_restart: all.filter((s) => s.pending_restart).length,
          findings_unavailable: findingsUnavailable,
          settings: all.filter(
            (s) =>
              (wanted === undefined || s.changed === wanted) &&
              (q === '' || s.name.toLowerCase().includes(q) || (s.description ?? '').toLowerCase().includes(q)),
          ),
        }
      },
      {
        query: query({
          changed: t.Optional(oneOf('changed', ['true', 'false'] as const)),
          q: t.Optional(t.String({ maxLength: MAX_QUERY, error: `q must be text of at most ${MAX_QUERY} characters` })),
        }),
        response: { 200: Configuration },
        detail: {
          summary:
            "The server's settings: value, unit, source, default, context, pending restart, and dbm's advice on each",
        },
      },
    )
}
