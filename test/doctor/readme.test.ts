// docs/doctor-rules.md, the doctor's rule reference, is exactly what scripts/doctor-rules.ts writes from the
// rules themselves, so it cannot drift from them.
import { expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { DOC_PATH, doctorRulesDoc, REGENERATE } from '../../scripts/doctor-rules.ts'
import { rules } from '../../src/server/doctor/rules/index.ts'

test('docs/doctor-rules.md lists every doctor rule as the rules describe themselves', () => {
  const written = readFileSync(DOC_PATH, 'utf8')
  const expected = doctorRulesDoc()
  if (written !== expected) {
    const a = written.split('\n')
    const b = expected.split('\n')
    const line = a.findIndex((l, i) => l !== b[i])
    throw new Error(`docs/doctor-rules.md is out of date (first difference at line ${line + 1}): run ${REGENERATE}`)
  }
  for (const rule of rules) {
    expect(written).toContain(`### \`${rule.id}\`\n\n${rule.summary}\n`)
    for (const [name, value] of Object.entries(rule.thresholds)) expect(written).toContain(`| \`${name}\` | ${value} |`)
  }
})
