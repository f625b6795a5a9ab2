// Random tokens and their stored hashes. Secrets of 256 random bits need no slow hash: SHA-256 of
// the secret is stored, and a stolen store does not give working keys or links.
import { createHash, timingSafeEqual } from 'node:crypto'

export function randomToken(bytes = 32): string {
  return Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString('base64url')
}

export function sha256(value: string): string {
  return createHash('sha256').update(value).digest('hex')
}

export function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}
