// A setting of the risky table (setting-risks.ts) changed in the last hours: one finding per setting,
// from the setting changes ingest derives (events/events.ts), naming the value before the first change in
// the window and the value now, why it matters, and (PostgreSQL, a change the risky way) the command
// that puts the old value back. A warning when the change goes the risky way, else info; a setting
// changed and changed back is no finding; a value another rule judges already (pg_risky_settings: fsync
// off, ...) is left to it. Values come from the monitored server: they are shown as SQL constants
// (sql-text.ts), cut, and reach commands only as such constants.
import type { ServerChange } from '../../store/events/server-changes.ts'
import { chString, commentText, pgIdent, pgString } from '../sql-text.ts'
import type { FindingDraft, Rule } from '../types.ts'
import { settings } from './postgres/log-evidence.ts'
import { SETTING_RISKS, type SettingRisk } from './setting-risks.ts'

const defaults = {
  /** How long after the change the finding stays. */
  keep_hours: 24,
}

const HOUR = 3_600_000
/** Events read per diagnosis at most (the newest). */
const MAX_CHANGES = 2_000
/** Characters of a value shown in a finding. */
const SHOWN_CHARS = 200
const iso = (ms: number) => new Date(ms).toISOString()

/** A value as events/events.ts writes it into an event's detail, and back. */
const NOT_SET = '(not set)'
const asShown = (v: string | undefined) => (v === undefined ? NOT_SET : v === '' ? "''" : v)
const fromShown = (s: string) => (s === NOT_SET ? undefined : s === "''" ? '' : s)

/**
 * The value before the oldest of a setting's changes (newest first), going back from the value now: each
 * event's detail is `before → after` with `after` the value of the event after it (the newest: now).
 * `known` is false when a detail does not end as expected (cut, or a change listed only by name).
 */
export function valueBefore(
  changes: ServerChange[],
  now: string | undefined,
): { before: string | undefined; known: boolean } {
  let after = asShown(now)
  for (const change of changes) {
    const detail = change.object === '' ? null : change.detail
    const suffix = ` → ${after}`
    if (detail === null || !detail.endsWith(suffix)) return { before: undefined, known: false }
    after = detail.slice(0, -suffix.length)
  }
  return { before: fromShown(after), known: true }
}

/** A value as a finding shows it: an SQL constant of the engine, cut; `not set` for a value at its default. */
export function shownValue(engine: string, v: string | undefined): string {
  if (v === undefined) return 'not set (the default)'
  const cut = v.length > SHOWN_CHARS ? v.slice(0, SHOWN_CHARS) : v
  return `${engine === 'clickhouse' ? chString(cut) : pgString(cut)}${cut === v ? '' : '…'}`
}

/** The names a batch that changed too many settings to list one by one lists in its detail (`a, b, … and N more`). */
const namesOfSummary = (detail: string | null) => new Set((detail ?? '').replace(/, … and \d+ more$/, '').split(', '))

function fixCommands(risk: SettingRisk, before: string | undefined): string[] {
  const name = pgIdent(risk.name)
  const set = before === undefined ? `ALTER SYSTEM RESET ${name};` : `ALTER SYSTEM SET ${name} = ${pgString(before)};`
  return [
    risk.restart
      ? `${set}   -- only if the change was not meant; then restart the server (it applies at a start only)`
      : `${set} SELECT pg_reload_conf();   -- only if the change was not meant`,
  ]
}

export const settingChanged: Rule<typeof defaults> = {
  id: 'setting_changed',
  summary:
    'A setting of the risky-settings table changed in the last hours: old and new value, why it matters, and the command that puts the old value back.',
  collectors: [],
  engine: 'any',
  category: 'configuration',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(settingChanged)
    const risks = SETTING_RISKS.filter((r) => r.engine === ctx.db.engine)
    const changes = await ctx.store.serverChanges.serverChanges(
      ctx.db.id,
      ['setting_change'],
      { since: ctx.now - t.keep_hours * HOUR, until: ctx.now + 1 },
      MAX_CHANGES,
    )
    if (changes.length === 0) return []
    const current = (await settings(ctx)) ?? {}
    const postgres = ctx.db.engine === 'postgres'
    const findings: FindingDraft[] = []
    for (const risk of risks) {
      // Newest first, as read; a batch that changed many at once lists them by name only.
      const mine = changes.filter(
        (c) => c.object === risk.name || (c.object === '' && namesOfSummary(c.detail).has(risk.name)),
      )
      if (mine.length === 0) continue
      const now = current[risk.name]
      const { before, known } = valueBefore(mine, now)
      if (known && before === now) continue
      if (risk.judgedBy?.when(now)) continue
      const warning = known ? risk.risky(before, now) : risk.risky(undefined, now)
      const last = mine[0]!
      const first = mine[mine.length - 1]!
      const from = known ? shownValue(ctx.db.engine, before) : 'a value dbm did not keep'
      const to = shownValue(ctx.db.engine, now)
      const label = commentText(risk.name, 100)
      findings.push({
        severity: warning ? 'warning' : 'info',
        object: risk.name,
        title: `${label} changed: ${commentText(known ? (before ?? 'default') : '?', 40)} → ${commentText(now ?? 'default', 40)}`,
        detail:
          `${label} changed from ${from} to ${to} at ${iso(last.ts)}` +
          `${mine.length > 1 ? ` (${mine.length} changes since ${iso(first.ts)})` : ''}. ` +
          `Why it matters: ${risk.why}.` +
          (postgres && risk.restart ? ' It applies only at a server start, so the server has restarted with it.' : ''),
        recommendation: warning
          ? `Make sure the change was meant${postgres ? '; if not, put the old value back (below)' : '; if not, put the old value back in the settings profile (users.xml or ALTER SETTINGS PROFILE)'}, and watch what the setting protects.`
          : 'Nothing to do if the change was planned; it is listed because this setting matters.',
        how_to_investigate: postgres
          ? [
              `SELECT name, setting, unit, source, sourcefile, sourceline, pending_restart FROM pg_settings WHERE name = ${pgString(risk.name)};`,
              `SELECT sourcefile, sourceline, setting, applied, error FROM pg_file_settings WHERE name = ${pgString(risk.name)};`,
            ]
          : [
              `SELECT name, value, changed, description FROM system.settings WHERE name = ${chString(risk.name)};`,
              `SELECT profile_name, user_name, role_name, value FROM system.settings_profile_elements WHERE setting_name = ${chString(risk.name)};`,
            ],
        how_to_fix: postgres && warning && known ? fixCommands(risk, before) : [],
        metrics: {
          setting: risk.name,
          value_before: known && before !== undefined ? before.slice(0, SHOWN_CHARS) : null,
          value_now: now === undefined ? null : now.slice(0, SHOWN_CHARS),
          changed_at: last.ts,
          changes: mine.length,
        },
      })
    }
    return findings
  },
}
