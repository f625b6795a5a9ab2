// The Issues page's pure parts: the doctor's groups by severity with their lead and consequences looked
// up by key (a finding the answer left out is skipped), how long a resolved alert was open, which cause
// an old link's ?finding= opens, and the old tabs' slugs that open the page.
import { describe, expect, test } from 'bun:test'
import {
  ISSUES_ALIASES,
  groupOfFinding,
  issuesBySeverity,
  openFor,
  wasNotified,
} from '../../src/web/pages/db/issues.tsx'
import type { Finding, FindingGroup } from '../../src/web/pages/db/types.ts'

const finding = (key: string, severity: Finding['severity'], cause: string): Finding => ({
  rule: key.split(':')[0]!,
  key,
  cause,
  severity,
  category: 'reliability',
  title: key,
  detail: '',
  recommendation: '',
  how_to_investigate: [],
  how_to_fix: [],
  objects: [],
  metrics: {},
  as_of: null,
})
const group = (key: string, severity: FindingGroup['severity'], findings: string[]): FindingGroup => ({
  key,
  kind: key.startsWith('session:') ? 'session' : 'finding',
  severity,
  title: findings[0]!,
  lead: findings[0]!,
  findings,
  objects: [],
  how_to_fix: [],
})

describe('issues by severity', () => {
  const holder = group('session:pid 7', 'critical', [
    'pg_idle_in_transaction:pid 7',
    'pg_dead_tuples:public.t',
    'pg_xmin_horizon:pid 7',
    'pg_gone:x',
  ])
  const alone = group('pg_cache_hit_ratio', 'warning', ['pg_cache_hit_ratio'])
  const findings = [
    finding('pg_dead_tuples:public.t', 'critical', holder.key),
    finding('pg_xmin_horizon:pid 7', 'critical', holder.key),
    finding('pg_idle_in_transaction:pid 7', 'warning', holder.key),
    finding('pg_cache_hit_ratio', 'warning', alone.key),
  ]
  test('each cause once, under its own severity, its lead first and its consequences in the group order', () => {
    const by = issuesBySeverity([holder, alone], findings)
    expect(by.critical.map((i) => [i.lead.key, i.consequences.map((f) => f.key)])).toEqual([
      ['pg_idle_in_transaction:pid 7', ['pg_dead_tuples:public.t', 'pg_xmin_horizon:pid 7']],
    ])
    expect(by.warning.map((i) => i.group.key)).toEqual(['pg_cache_hit_ratio'])
    expect(by.info).toEqual([])
  })
  test("an old link's finding opens its cause; the cause's own key too", () => {
    expect(groupOfFinding([holder, alone], 'pg_dead_tuples:public.t')?.key).toBe('session:pid 7')
    expect(groupOfFinding([holder, alone], 'session:pid 7')?.key).toBe('session:pid 7')
    expect(groupOfFinding([holder, alone], 'pg_nothing')).toBeUndefined()
    expect(groupOfFinding([holder, alone], null)).toBeUndefined()
  })
})

test('a resolved alert was open from its opening to its resolution; an open one has no such time', () => {
  expect(openFor({ opened_at: '2026-01-01T10:00:00.000Z', resolved_at: '2026-01-01T10:12:04.000Z' })).toBe(724_000)
  expect(openFor({ opened_at: '2026-01-01T10:00:00.000Z', resolved_at: null })).toBeNull()
})

test('Doctor, Recommendations and Alerts open Issues', () => {
  expect([...ISSUES_ALIASES].sort()).toEqual(['alerts', 'doctor', 'recommendations'])
})

test('an alert sent only to an alert destination was notified; one queued there and not sent yet was not', () => {
  const none = { email: null, webhook: null, destinations: [] }
  expect(wasNotified(none)).toBe(false)
  expect(wasNotified({ ...none, destinations: [{ id: 'd', kind: 'pagerduty', name: 'on-call', sent_at: null }] })).toBe(
    false,
  )
  expect(
    wasNotified({
      ...none,
      destinations: [{ id: 'd', kind: 'pagerduty', name: 'on-call', sent_at: '2026-01-01T10:00:00.000Z' }],
    }),
  ).toBe(true)
  expect(wasNotified({ ...none, email: '2026-01-01T10:00:00.000Z' })).toBe(true)
})
