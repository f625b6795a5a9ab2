// API keys (migrations 1 and 14): who made each key, what it may do (its scopes), when it was last used
// and whether it is revoked. Reads (finding a key as a request presents it, listing an organization's
// keys with their creators) are apart from writes (creating, revoking, recording use, and revoking every
// key a user created, which accounts/members.ts runs inside a removal's or demotion's transaction).
// Only SHA-256 of a key's secret is stored.
import type { ApiKeyScope } from '../../../shared/api/api-keys.ts'
import { API_KEY_SCOPES } from '../../../shared/api/api-keys.ts'
import { num, numOrNull, type DbRow } from '../rows.ts'
import type { SqlDriver } from '../driver.ts'

export type { ApiKeyScope }

export interface ApiKey {
  id: string
  org_id: string
  key_id: string
  name: string
  secret_hash: string
  /** What the key may do; empty: nothing (a key is never created so). */
  scopes: ApiKeyScope[]
  /** The user who created it, or who created the key it was made with; null for keys made by a key before migration 14. */
  created_by: string | null
  /** The key it was made with; null when a user made it. */
  created_by_key: string | null
  created_at: number
  last_used_at: number | null
  revoked_at: number | null
}

export type NewApiKey = Omit<ApiKey, 'last_used_at' | 'revoked_at' | 'created_by_key'> & {
  created_by_key?: string | null
}

/** A key as an organization's list shows it: with its creator, while that user exists. */
export interface ApiKeyEntry extends ApiKey {
  creator: { id: string; email: string; name: string } | null
}

export interface ApiKeyReads {
  /** The organization's keys (active ones, or all), oldest first, each with its creator. */
  listApiKeys(orgId: string, includeRevoked: boolean): Promise<ApiKeyEntry[]>
  /** The key of that key_id (the part of the key before its secret), revoked or not. */
  findApiKey(keyId: string): Promise<ApiKey | undefined>
}

/**
 * Raised by createApiKey when the key would outlive its creator's right to make it: the creating key is
 * revoked, or the creating user is no longer an owner of the organization (a removal or demotion that
 * committed while the request was on its way).
 */
export class CreatorRevokedError extends Error {
  constructor(readonly by: 'key' | 'user') {
    super(by === 'key' ? 'API key has been revoked' : 'only an owner can manage API keys')
    this.name = 'CreatorRevokedError'
  }
}

export interface ApiKeyWrites {
  /**
   * Creates the key. Under the organization's members lock, so a removal or demotion (which revokes the
   * creator's keys under that lock) is wholly before or after it: CreatorRevokedError when it came first.
   */
  createApiKey(input: NewApiKey): Promise<ApiKey>
  /** Revokes the key (idempotent); false when the organization has no key of that id. */
  revokeApiKey(orgId: string, id: string, now: number): Promise<boolean>
  /** Records use; writes only when the stored time is older than `minIntervalMs`. */
  touchApiKey(id: string, now: number, minIntervalMs: number): Promise<void>
}

export interface ApiKeyStore extends ApiKeyReads, ApiKeyWrites {}

/** Scopes as stored: their names in API_KEY_SCOPES order, separated by single spaces. */
export function scopesText(scopes: readonly ApiKeyScope[]): string {
  return API_KEY_SCOPES.filter((s) => scopes.includes(s)).join(' ')
}

/** The stored scopes; a name this version does not know, and NULL, grant nothing. */
export function parseScopes(text: unknown): ApiKeyScope[] {
  if (typeof text !== 'string') return []
  const names = new Set(text.split(' '))
  return API_KEY_SCOPES.filter((s) => names.has(s))
}

function toApiKey(r: DbRow): ApiKey {
  return {
    id: r.id,
    org_id: r.org_id,
    key_id: r.key_id,
    name: r.name,
    secret_hash: r.secret_hash,
    scopes: parseScopes(r.scopes),
    created_by: r.created_by ?? null,
    created_by_key: r.created_by_key ?? null,
    created_at: num(r.created_at),
    last_used_at: numOrNull(r.last_used_at),
    revoked_at: numOrNull(r.revoked_at),
  }
}

/** The lock every change of an organization's members takes (accounts/members.ts): key creation takes it too. */
export const membersLock = (orgId: string) => `dbm:members:${orgId}`

const KEY_COLUMNS =
  'k.id, k.org_id, k.key_id, k.name, k.secret_hash, k.scopes, k.created_by, k.created_by_key, k.created_at, k.last_used_at, k.revoked_at'

/**
 * Revokes, in the caller's transaction, every live key of the organization that `userId` created, and
 * every key made with one of those (at any depth); returns their key_ids (for SqlApiKeys.evict).
 * Keys made by a key record that key's creator as theirs, so the first set already holds them; the walk
 * over created_by_key keeps the rule whatever created_by says.
 */
export async function revokeKeysCreatedBy(
  tx: SqlDriver,
  orgId: string,
  userId: string,
  now: number,
): Promise<string[]> {
  const rows = await tx.all<{ key_id: string }>(
    `WITH RECURSIVE made(id) AS (
       SELECT id FROM api_keys WHERE org_id = $1 AND created_by = $2
       UNION
       SELECT k.id FROM api_keys k JOIN made ON k.created_by_key = made.id WHERE k.org_id = $1
     )
     UPDATE api_keys SET revoked_at = $3
     WHERE org_id = $1 AND revoked_at IS NULL AND id IN (SELECT id FROM made)
     RETURNING key_id`,
    [orgId, userId, now],
  )
  return rows.map((r) => r.key_id)
}

/**
 * The API key store over a driver. `cache`: keys by key_id, SQLite only (the file belongs to this one
 * process, so every revocation passes through here or through evict() and drops the key at once); the
 * PostgreSQL store may be shared by several processes and always reads the key.
 */
export class SqlApiKeys implements ApiKeyStore {
  constructor(
    private readonly driver: SqlDriver,
    private readonly cache: Map<string, ApiKey> | undefined,
  ) {}

  async createApiKey(input: NewApiKey): Promise<ApiKey> {
    const key: ApiKey = {
      ...input,
      scopes: parseScopes(scopesText(input.scopes)),
      created_by_key: input.created_by_key ?? null,
      last_used_at: null,
      revoked_at: null,
    }
    await this.driver.transaction(async (tx) => {
      if (key.created_by_key !== null) {
        const parent = await tx.get(
          'SELECT 1 AS x FROM api_keys WHERE id = $1 AND org_id = $2 AND revoked_at IS NULL',
          [key.created_by_key, key.org_id],
        )
        if (!parent) throw new CreatorRevokedError('key')
      }
      if (key.created_by !== null) {
        const owner = await tx.get("SELECT 1 AS x FROM users WHERE id = $1 AND org_id = $2 AND role = 'owner'", [
          key.created_by,
          key.org_id,
        ])
        if (!owner) throw new CreatorRevokedError(key.created_by_key !== null ? 'key' : 'user')
      }
      await tx.run(
        'INSERT INTO api_keys (id, org_id, key_id, name, secret_hash, scopes, created_by, created_by_key, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)',
        [
          key.id,
          key.org_id,
          key.key_id,
          key.name,
          key.secret_hash,
          scopesText(key.scopes),
          key.created_by,
          key.created_by_key,
          key.created_at,
        ],
      )
    }, membersLock(key.org_id))
    return key
  }

  async listApiKeys(orgId: string, includeRevoked: boolean): Promise<ApiKeyEntry[]> {
    const rows = await this.driver.all(
      `SELECT ${KEY_COLUMNS}, u.email AS creator_email, u.name AS creator_name
       FROM api_keys k LEFT JOIN users u ON u.id = k.created_by AND u.org_id = k.org_id
       WHERE k.org_id = CAST($1 AS TEXT) ${includeRevoked ? '' : 'AND k.revoked_at IS NULL'} ORDER BY k.created_at, k.id`,
      [orgId],
    )
    return rows.map((r: DbRow) => ({
      ...toApiKey(r),
      creator: r.creator_email == null ? null : { id: r.created_by, email: r.creator_email, name: r.creator_name },
    }))
  }

  async findApiKey(keyId: string): Promise<ApiKey | undefined> {
    const cached = this.cache?.get(keyId)
    if (cached) return cached
    const r = await this.driver.get(`SELECT ${KEY_COLUMNS} FROM api_keys k WHERE k.key_id = $1`, [keyId])
    const key = r ? toApiKey(r) : undefined
    if (key && this.cache) {
      if (this.cache.size >= 10_000) this.cache.clear()
      this.cache.set(keyId, key)
    }
    return key
  }

  async revokeApiKey(orgId: string, id: string, now: number): Promise<boolean> {
    const changed = await this.driver.run(
      'UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2 AND org_id = $3',
      [now, id, orgId],
    )
    if (this.cache) for (const [keyId, key] of this.cache) if (key.id === id) this.cache.delete(keyId)
    return changed > 0
  }

  async touchApiKey(id: string, now: number, minIntervalMs: number): Promise<void> {
    const changed = await this.driver.run(
      'UPDATE api_keys SET last_used_at = $1 WHERE id = $2 AND (last_used_at IS NULL OR last_used_at < $3)',
      [now, id, now - minIntervalMs],
    )
    if (changed > 0 && this.cache) for (const key of this.cache.values()) if (key.id === id) key.last_used_at = now
  }

  /** Drops keys revoked elsewhere (revokeKeysCreatedBy) from the cache. */
  evict(keyIds: readonly string[]): void {
    for (const keyId of keyIds) this.cache?.delete(keyId)
  }
}
