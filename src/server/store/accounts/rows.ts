// Account rows as the stores give them (SQLite integers, PostgreSQL BIGINT strings) made into records:
// shared by the account store (sql-store.ts) and the members store (accounts/members.ts).
import type { Organization, User } from './types.ts'

export const num = (v: unknown): number => Number(v)
export const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v))

export function toOrg(r: any): Organization {
  return { id: r.id, name: r.name, slug: r.slug, plan: r.plan, verified: Boolean(r.verified), created_at: num(r.created_at) }
}

export function toUser(r: any): User {
  return {
    id: r.id,
    org_id: r.org_id,
    email: r.email,
    name: r.name,
    role: r.role,
    email_verified_at: numOrNull(r.email_verified_at),
    created_at: num(r.created_at),
  }
}
