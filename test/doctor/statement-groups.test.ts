// Findings about one statement are one issue (grouping.ts, issue 26): its regression leads, its plan
// change and its slowness are listed under it, and the temporary files join it only when the finding
// names it as the statement that wrote most of them. Pure: findings as the rules write them.
import { describe, expect, test } from 'bun:test'
import { causeOf, groupFindings } from '../../src/server/doctor/grouping.ts'
import type { Finding } from '../../src/server/doctor/types.ts'

const finding = (
  rule: string,
  object: string | undefined,
  severity: Finding['severity'],
  metrics: Finding['metrics'] = {},
  objects?: string[],
): Omit<Finding, 'cause'> => ({
  rule,
  key: object === undefined ? rule : `${rule}:${object}`,
  severity,
  category: 'performance',
  title: `${rule} title`,
  detail: '',
  recommendation: '',
  how_to_investigate: [],
  how_to_fix: [],
  objects: objects ?? (object === undefined ? [] : [object]),
  metrics,
  as_of: null,
})

describe('a statement as a cause', () => {
  test('regression, plan change and spills of one statement: one group led by the regression, in severity order under it', () => {
    const { findings, groups } = groupFindings([
      finding('pg_plan_changed', '-42', 'critical', {}, ['-42', 'orders']),
      finding('pg_temp_files', undefined, 'warning', { statement: '-42' }, ['-42', '7']),
      finding('pg_statement_regressed', '-42', 'warning'),
    ])
    expect(groups).toHaveLength(1)
    expect(groups[0]).toMatchObject({
      key: 'statement:-42',
      kind: 'statement',
      severity: 'critical',
      lead: 'pg_statement_regressed:-42',
      title: 'pg_statement_regressed title',
      findings: ['pg_statement_regressed:-42', 'pg_plan_changed:-42', 'pg_temp_files'],
      objects: ['-42', 'orders', '7'],
    })
    expect(findings.map((f) => f.cause)).toEqual(['statement:-42', 'statement:-42', 'statement:-42'])
  })

  test('a plan change alone leads its statement; its cause stays when the regression comes', () => {
    expect(causeOf(finding('pg_plan_changed', '-42', 'warning'))).toEqual({ key: 'statement:-42', kind: 'statement' })
    expect(causeOf(finding('pg_statement_regressed', '-42', 'warning'))).toEqual({
      key: 'statement:-42',
      kind: 'statement',
    })
  })

  test('temporary files no statement wrote most of stand alone, and a named one of another statement goes to that one', () => {
    const { groups } = groupFindings([
      finding('pg_statement_regressed', '-42', 'warning'),
      finding('pg_temp_files', undefined, 'warning', { statement: null }, ['-42', '7']),
    ])
    expect(groups.map((g) => [g.key, g.findings])).toEqual([
      ['statement:-42', ['pg_statement_regressed:-42']],
      ['pg_temp_files', ['pg_temp_files']],
    ])
    expect(causeOf(finding('pg_temp_files', undefined, 'info', { statement: '7' }))).toEqual({
      key: 'statement:7',
      kind: 'statement',
    })
    // Another rule's metric of that name does not move it.
    expect(causeOf(finding('pg_cache_hit_ratio', undefined, 'info', { statement: '7' }))).toEqual({
      key: 'pg_cache_hit_ratio',
      kind: 'finding',
    })
  })
})
