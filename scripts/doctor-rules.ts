// Writes docs/doctor-rules.md, the doctor's rule reference, from the rules themselves: each rule's id,
// engine, category, summary and collectors (its metadata), its thresholds with their defaults, and each
// threshold's doc comment from the rule's file and the range a database's own value must fall in
// (doctor/thresholds.ts). `bun scripts/doctor-rules.ts` writes the file;
// `--check` only says whether it is up to date. test/doctor/readme.test.ts fails when it is not.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { collectorNames } from '../src/shared/collectors.ts'
import { rules } from '../src/server/doctor/rules/index.ts'
import { rangeOf } from '../src/server/doctor/thresholds.ts'
import type { Rule } from '../src/server/doctor/types.ts'

const ROOT = join(import.meta.dir, '..')
const RULES_DIR = join(ROOT, 'src/server/doctor/rules')
export const DOC_PATH = join(ROOT, 'docs/doctor-rules.md')
export const REGENERATE = 'bun scripts/doctor-rules.ts'

const ENGINE = { any: 'both', postgres: 'PostgreSQL', clickhouse: 'ClickHouse' } as const
const SECTIONS = [
  { engine: 'any', title: 'Both engines' },
  { engine: 'postgres', title: 'PostgreSQL' },
  { engine: 'clickhouse', title: 'ClickHouse' },
] as const

/** The rule files, by path, with their text. */
function ruleFiles(): Map<string, string> {
  const files = new Map<string, string>()
  for (const entry of readdirSync(RULES_DIR, { recursive: true, encoding: 'utf8' }).sort()) {
    if (entry.endsWith('.ts')) files.set(join(RULES_DIR, entry), readFileSync(join(RULES_DIR, entry), 'utf8'))
  }
  return files
}

/** The file that declares the rule (`id: '<id>'`). */
function fileOf(rule: Rule, files: Map<string, string>): { path: string; text: string } {
  for (const [path, text] of files) if (text.includes(`id: '${rule.id}',`)) return { path, text }
  throw new Error(`no file under src/server/doctor/rules declares the rule ${rule.id}`)
}

/** The source of the rule's thresholds object: the named `const X = {...}` it points at, else nothing. */
function thresholdsSource(rule: Rule, text: string): string {
  const at = text.indexOf(`id: '${rule.id}',`)
  const name = /thresholds: ([A-Za-z_$][\w$]*)\b/.exec(text.slice(at))?.[1]
  if (!name) return ''
  const start = text.search(new RegExp(`const ${name.replace(/\$/g, '\\$')}\\b[^=]*= \\{`))
  if (start < 0) return ''
  const end = text.indexOf('\n}', start)
  return end < 0 ? '' : text.slice(start, end)
}

/** The source of the rule's lists of names (`const lists = {...}` in its file), else nothing. */
function listsSource(rule: Rule, text: string): string {
  if (!rule.lists) return ''
  const start = text.search(/const lists\b[^=]*= \{/)
  if (start < 0) return ''
  const end = text.indexOf('\n}', start)
  return end < 0 ? '' : text.slice(start, end)
}

/** The values a database's own threshold takes, in words. */
function rangeText(rule: Rule, key: string): string {
  const r = rangeOf(rule, key)
  const n = (v: number) => (v >= 1e12 && Number.isInteger(Math.log10(v)) ? `10^${Math.log10(v)}` : String(v))
  return `${n(r.min)} to ${n(r.max)}${r.whole ? ', whole' : ''}`
}

/** A threshold's doc comment (`/** ... *\/` right above its key), one line. */
function thresholdComment(source: string, key: string): string {
  const m = new RegExp(`/\\*\\*((?:(?!\\*/)[\\s\\S])*)\\*/\\s*\\n\\s*${key}\\s*:`).exec(source)
  if (!m) return ''
  return m[1]!
    .split('\n')
    .map((line) => line.replace(/^\s*\*?\s?/, '').trim())
    .filter(Boolean)
    .join(' ')
}

const cell = (text: string) => text.replace(/\|/g, '\\|')

/** What a threshold without a doc comment means, read from its name where the name says it plainly. */
function meaningFromName(key: string): string {
  const level = /(^|_)critical(_|$)/.test(key)
    ? 'critical'
    : /(^|_)warning(_|$)/.test(key)
      ? 'a warning'
      : /^info_/.test(key)
        ? 'an info finding'
        : ''
  if (level) return /_below$/.test(key) ? `${level} below this (by its name)` : `${level} from this (by its name)`
  if (key === 'window_s') return 'the trailing window judged, in seconds (by its name)'
  if (key === 'window_minutes') return 'the trailing window judged, in minutes (by its name)'
  if (key === 'max_findings') return 'at most this many findings (by its name)'
  return ''
}

function checkCollectors(rule: Rule) {
  const known = collectorNames.filter((c) => rule.engine === 'any' || c.engine === rule.engine).map((c) => c.name)
  for (const name of rule.collectors) {
    if (!known.includes(name))
      throw new Error(`rule ${rule.id} names the collector ${name}, which ${ENGINE[rule.engine]} has not`)
  }
  if (!rule.summary.trim() || rule.summary.includes('\n')) throw new Error(`rule ${rule.id} needs a one-line summary`)
}

/** The table of every rule with its default thresholds, each rule linked to its section. */
export function doctorRulesTable(): string {
  const lines = ['| rule | engine | category | thresholds (defaults) |', '|---|---|---|---|']
  for (const rule of rules) {
    const thresholds = [
      ...Object.entries(rule.thresholds).map(([name, value]) => `${name} ${value}`),
      ...Object.entries(rule.lists ?? {}).map(
        ([name, names]) => `${name} ${names.length === 0 ? 'none' : names.join(' ')}`,
      ),
    ].join(', ')
    lines.push(`| [\`${rule.id}\`](#${rule.id}) | ${ENGINE[rule.engine]} | ${rule.category} | ${thresholds || '—'} |`)
  }
  return lines.join('\n')
}

/** docs/doctor-rules.md as the rules make it. */
export function doctorRulesDoc(): string {
  const files = ruleFiles()
  const count = (engine: Rule['engine']) => rules.filter((r) => r.engine === engine).length
  const out = [
    '# Doctor rules',
    '',
    `<!-- Generated by \`${REGENERATE}\` from src/server/doctor/rules/: edit the rules, not this file. -->`,
    '',
    `The doctor's ${rules.length} rules: ${count('any')} for both engines, ${count('postgres')} for PostgreSQL and ${count('clickhouse')} for`,
    'ClickHouse, each with what it finds, the collectors of the agent whose data it reads, and its thresholds',
    'with their defaults. How findings make the health score, and what the doctor answers: [doctor.md](doctor.md);',
    'how they become recommendations and alerts: [alerts.md](alerts.md). This file is generated from the rules',
    `themselves by \`${REGENERATE}\`; test/doctor/readme.test.ts fails when it differs from what the script writes.`,
    '',
    '## Changing a threshold',
    '',
    "A rule's thresholds have the defaults listed below (the table at the top of its file, linked under each",
    'rule, with the practice they come from in its comment). Each database may set its own values: on its',
    '**Settings** page (owners; members see them) or with `PUT /api/v1/databases/{id}/thresholds`',
    '([api.md](api.md#doctor-thresholds)). A value must fall in the range listed beside it, and a warning',
    "threshold may not pass its critical one; the next diagnosis applies it. Lists of names (`pg_superusers`'",
    "`allowed_names`: the superusers an operator means) are set the same way. The rule's tests in",
    "`test/doctor/` show what each threshold does. `custom_metric_threshold` takes its threshold from each custom metric's own",
    '`alert` ([custom-metrics.md](custom-metrics.md)); `pg_risky_settings` and `setting_changed` judge the',
    'settings of `src/server/doctor/rules/setting-risks.ts`. A collector a rule reads that is turned off',
    '(`enabled_collectors`, `disabled_collectors`) or not supported by the server leaves that rule without',
    "findings, or without the part that collector feeds. A threshold's meaning is its doc comment in the rule's",
    'file; one marked "(by its name)" has none there and is read from its name.',
    '',
    '## All rules',
    '',
    doctorRulesTable(),
  ]
  for (const section of SECTIONS) {
    out.push('', `## ${section.title}`)
    for (const rule of rules.filter((r) => r.engine === section.engine)) {
      checkCollectors(rule)
      const { path, text } = fileOf(rule, files)
      const file = relative(ROOT, path)
      const reads = rule.collectors.length
        ? rule.collectors.map((c) => `\`${c}\``).join(', ')
        : "what every batch carries (the agent's reports, `server_state`)"
      out.push(
        '',
        `### \`${rule.id}\``,
        '',
        rule.summary,
        '',
        `${ENGINE[rule.engine]} · ${rule.category} · reads ${reads} · [${file}](../${file})`,
      )
      const thresholds = Object.entries(rule.thresholds)
      const lists = Object.entries(rule.lists ?? {})
      if (thresholds.length === 0 && lists.length === 0) continue
      const source = thresholdsSource(rule, text)
      out.push('', '| threshold | default | range | meaning |', '|---|---|---|---|')
      for (const [key, value] of thresholds)
        out.push(
          `| \`${key}\` | ${value} | ${rangeText(rule, key)} | ${cell(thresholdComment(source, key) || meaningFromName(key)) || '—'} |`,
        )
      for (const [key, names] of lists) {
        out.push(
          `| \`${key}\` | ${names.length === 0 ? 'none' : cell(names.join(', '))} | names | ${cell(thresholdComment(listsSource(rule, text), key)) || '—'} |`,
        )
      }
    }
  }
  return `${out.join('\n')}\n`
}

if (import.meta.main) {
  const doc = doctorRulesDoc()
  if (process.argv.includes('--check')) {
    const current = readFileSync(DOC_PATH, 'utf8')
    if (current !== doc) {
      console.error(`docs/doctor-rules.md is out of date: run ${REGENERATE}`)
      process.exit(1)
    }
    console.log('docs/doctor-rules.md is up to date')
  } else {
    writeFileSync(DOC_PATH, doc)
    console.log(`wrote docs/doctor-rules.md (${rules.length} rules)`)
  }
}
