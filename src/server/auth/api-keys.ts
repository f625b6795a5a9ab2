// API key format `dbm_ak_<key_id>_<secret>`: key_id is 16 hex characters and names the record,
// secret is 32 random bytes in base64url. Only SHA-256 of the secret is stored.
import { randomToken, sha256 } from './secrets.ts'

const KEY_PATTERN = /^dbm_ak_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$/

export interface GeneratedKey {
  keyId: string
  secretHash: string
  fullKey: string
}

export function generateApiKey(): GeneratedKey {
  const keyId = Buffer.from(crypto.getRandomValues(new Uint8Array(8))).toString('hex')
  const secret = randomToken(32)
  return { keyId, secretHash: sha256(secret), fullKey: `dbm_ak_${keyId}_${secret}` }
}

export function parseApiKey(value: string): { keyId: string; secret: string } | undefined {
  const m = KEY_PATTERN.exec(value)
  return m ? { keyId: m[1]!, secret: m[2]! } : undefined
}

export function looksLikeApiKey(value: string): boolean {
  return value.startsWith('dbm_ak_')
}

export function keyPrefix(keyId: string): string {
  return `dbm_ak_${keyId}_...`
}
