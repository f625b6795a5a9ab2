// The health score and status from the doctor's findings (the formula the README documents):
//   score = max(0, 100 - the sum over rules of the penalty of each rule's worst finding)
//   penalties: critical 30, warning 10, info 2
//   status: unhealthy with any critical finding, degraded with any warning, else healthy.
// A rule counts once however many objects it names (ten unused indexes are one problem to fix, not ten).
import type { Finding, Severity } from './types.ts'

export const SEVERITY_PENALTY: Record<Severity, number> = { critical: 30, warning: 10, info: 2 }

export const SEVERITY_ORDER: Record<Severity, number> = { critical: 0, warning: 1, info: 2 }

export type DoctorStatus = 'healthy' | 'degraded' | 'unhealthy'

export function healthScore(findings: Finding[]): number {
  const worst = new Map<string, Severity>()
  for (const f of findings) {
    const seen = worst.get(f.rule)
    if (!seen || SEVERITY_ORDER[f.severity] < SEVERITY_ORDER[seen]) worst.set(f.rule, f.severity)
  }
  let penalty = 0
  for (const severity of worst.values()) penalty += SEVERITY_PENALTY[severity]
  return Math.max(0, 100 - penalty)
}

export function doctorStatus(findings: Finding[]): DoctorStatus {
  if (findings.some((f) => f.severity === 'critical')) return 'unhealthy'
  if (findings.some((f) => f.severity === 'warning')) return 'degraded'
  return 'healthy'
}
