// The accounts resource: organizations, users, e-mail tokens, refresh tokens (sessions), rate limits,
// API keys (api-keys.ts) and members and invites (members.ts). Records, interfaces and the errors of the
// contract declared here; reads.ts implements AccountReads, writes.ts AccountWrites, api-keys.ts and
// members.ts their own.

/** Raised by createAccount when the e-mail address already has an account. */
export class EmailTakenError extends Error {
  constructor() {
    super('email is already registered')
    this.name = 'EmailTakenError'
  }
}

/** Raised by createAccount with `onlyFirst` when the store already has an organization. */
export class SignupClosedError extends Error {
  constructor() {
    super('signup is closed on this server')
    this.name = 'SignupClosedError'
  }
}

export interface Organization {
  id: string
  name: string
  slug: string
  plan: string
  verified: boolean
  created_at: number
}

export interface User {
  id: string
  org_id: string
  email: string
  name: string
  role: string
  email_verified_at: number | null
  created_at: number
}

export interface UserWithPassword extends User {
  password_hash: string
}

export type EmailTokenKind = 'verify' | 'reset'

export interface RefreshTokenRecord {
  id: string
  user_id: string
  family_id: string
  expires_at: number
  revoked_at: number | null
}

/** Outcome of presenting a refresh token for rotation; `sessionId` is the token's family. */
export type RotateResult =
  | { ok: true; userId: string; sessionId: string }
  | { ok: false; reason: 'unknown' | 'expired' | 'revoked' | 'reused' }

/** Outcome of counting a request against a limit. */
export interface LimitResult {
  allowed: boolean
  /** When not allowed: milliseconds until a request would be allowed again. */
  retryAfterMs: number
}

/** Reads of organizations, users, tokens and sessions. */
export interface AccountReads {
  /** True once any organization exists (DBM_SIGNUP=closed then refuses signups). */
  hasOrganization(): Promise<boolean>
  findUserByEmail(email: string): Promise<UserWithPassword | undefined>
  getUser(id: string): Promise<User | undefined>
  getOrganization(id: string): Promise<Organization | undefined>
  /** The user of a token that has already been used (a verification link opened twice), else undefined. */
  usedEmailTokenUser(tokenHash: string, kind: EmailTokenKind): Promise<string | undefined>
  /** The user when `sessionId` is one of their live sessions, else undefined. */
  getSessionUser(userId: string, sessionId: string): Promise<User | undefined>
}

/** Changes to accounts, tokens and sessions, and the rate limits every process on the store shares. */
export interface AccountWrites {
  /**
   * Creates an organization and its owner; EmailTakenError when the address has an account. With
   * `onlyFirst`, SignupClosedError when any organization exists (checked in the same transaction).
   */
  createAccount(input: {
    org: { name: string; slug: string; plan: string }
    user: { email: string; name: string; passwordHash: string; role: string }
    onlyFirst?: boolean
  }): Promise<{ org: Organization; user: User }>
  setPassword(userId: string, passwordHash: string): Promise<void>
  markEmailVerified(userId: string, at: number): Promise<void>

  // single-use e-mail tokens (verification, password reset), stored as hashes. A user has at most one
  // live reset token: issuing one ends the older ones, and consuming one ends any other.
  createEmailToken(input: {
    tokenHash: string
    userId: string
    kind: EmailTokenKind
    expiresAt: number
    now: number
  }): Promise<void>
  /** Marks the token used and returns its user when it exists, is unused and unexpired. */
  consumeEmailToken(tokenHash: string, kind: EmailTokenKind, now: number): Promise<string | undefined>

  // refresh tokens: rotated on use, reuse revokes the family. A family is one session (one sign-in),
  // live while it holds an unrevoked token; access tokens name their session and die with it.
  createRefreshToken(record: Omit<RefreshTokenRecord, 'revoked_at'> & { now: number }): Promise<void>
  /** Revokes `id` and records `next` in the same family when `id` is live; detects reuse. */
  rotateRefreshToken(id: string, next: { id: string; expires_at: number }, now: number): Promise<RotateResult>
  revokeRefreshToken(id: string, now: number): Promise<void>
  /** Ends the user's session `sessionId` (a family): its refresh and access tokens are refused from now on. */
  revokeSession(userId: string, sessionId: string, now: number): Promise<void>
  /** Signs the user out everywhere: ends every session of the user. */
  revokeUserSessions(userId: string, now: number): Promise<void>

  // rate limits and cooldowns, shared by every process on the store
  /** Counts one request under `key`; allowed while at most `limit` fall in the trailing window. */
  hitRateLimit(key: string, limit: number, windowMs: number, now: number): Promise<LimitResult>
  /** Allowed when no allowed request under `key` happened in the last `cooldownMs`; records it then. */
  takeCooldown(key: string, cooldownMs: number, now: number): Promise<LimitResult>
  /** Housekeeping: removes rate-limit events older than `before`; returns how many. */
  sweepRateEvents(before: number): Promise<number>
}
