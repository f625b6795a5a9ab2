// Account rows as the stores give them (SQLite integers, PostgreSQL BIGINT strings) made into records:
// shared by the account reads and writes (reads.ts, writes.ts) and the members store (members.ts).
import { num, numOrNull, type DbRow } from '../rows.ts'
import type { Organization, User } from './types.ts'

// users.tokens_valid_after (schema version 2) is no longer read or written: access tokens name their
// session (refresh-token family) instead, which revokes them without a clock's precision.
export const USER_COLUMNS = 'id, org_id, email, name, role, email_verified_at, created_at'

export function toOrg(r: DbRow): Organization {
  return {
    id: r.id,
    name: r.name,
    slug: r.slug,
    plan: r.plan,
    verified: Boolean(r.verified),
    created_at: num(r.created_at),
  }
}

export function toUser(r: DbRow): User {
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
