// Random tokens and their stored hashes. Secrets of 256 random bits need no slow hash: SHA-256 of
// the secret is stored, and a stolen store does not give working keys or links.

export function randomToken(bytes = 32): string {
  return Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString('base64url')
}

export function sha256(value: string): string {
  return Bun.CryptoHasher.hash('sha256', value, 'hex') as string
}

/** Compares two hex digests in time that depends only on their length. */
export function sameHash(a: string, b: string): boolean {
  if (a.length !== b.length) return false
  let diff = 0
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i)
  return diff === 0
}
