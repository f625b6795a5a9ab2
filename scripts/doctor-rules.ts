// Prints the README's table of doctor rules and their default thresholds, from the rules themselves:
// `bun scripts/doctor-rules.ts`. test/doctor/readme.test.ts checks that the README holds this table.
import { rules } from '../src/server/doctor/rules/index.ts'

const ENGINE = { any: 'both', postgres: 'PostgreSQL', clickhouse: 'ClickHouse' } as const

export function doctorRulesTable(): string {
  const lines = ['| rule | engine | category | thresholds (defaults) |', '|---|---|---|---|']
  for (const rule of rules) {
    const thresholds = Object.entries(rule.thresholds)
      .map(([name, value]) => `${name} ${value}`)
      .join(', ')
    lines.push(`| \`${rule.id}\` | ${ENGINE[rule.engine]} | ${rule.category} | ${thresholds || '—'} |`)
  }
  return lines.join('\n')
}

if (import.meta.main) console.log(doctorRulesTable())
