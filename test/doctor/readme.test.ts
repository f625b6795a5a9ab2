// The README's table of doctor rules is the one scripts/doctor-rules.ts prints from the rules themselves.
import { expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { doctorRulesTable } from '../../scripts/doctor-rules.ts'

test('README lists every doctor rule with its default thresholds', () => {
  const readme = readFileSync(join(import.meta.dir, '../../README.md'), 'utf8')
  const match = /<!-- doctor-rules:start -->\n([\s\S]*?)\n<!-- doctor-rules:end -->/.exec(readme)
  expect(match?.[1]).toBe(doctorRulesTable())
})
