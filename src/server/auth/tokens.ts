// JWT access and refresh tokens (HS256 through @elysiajs/jwt). Access tokens live 15 minutes,
// refresh tokens 7 days; each carries a `typ` so one kind is never accepted as the other, and
// verification pins the algorithm (an alg:none or RS256 token is rejected). An access token names
// its session (`sid`, the refresh-token family it came from): it is honoured only while that session
// is live, so ending a session ends its access tokens at once, whatever second they were issued in.
// Tokens are signed with one secret (the store's, shared by every serve: serve.ts) and verified with it
// or any of `accepted` (the data directory's, which signed them before the store held one).
import { jwt } from '@elysiajs/jwt'
import { tokenLifetimes } from '../limits.ts'

export interface AccessClaims {
  sub: string
  org: string
  typ: 'access'
  /** The session: the id of the refresh-token family the token was issued for. */
  sid: string
  /** Issued at, epoch seconds. */
  iat: number
}

export interface RefreshClaims {
  sub: string
  jti: string
  typ: 'refresh'
}

interface Signer {
  sign(payload: Record<string, unknown>): Promise<string>
  verify(token?: string, options?: Record<string, unknown>): Promise<Record<string, unknown> | false>
}

export class TokenService {
  private readonly signer: Signer
  private readonly verifiers: Signer[]

  constructor(
    secret: string,
    private readonly clock: () => number = Date.now,
    accepted: readonly string[] = [],
  ) {
    const signerOf = (s: string) =>
      (jwt({ secret: s, alg: 'HS256' }) as unknown as { decorator: { jwt: Signer } }).decorator.jwt
    this.signer = signerOf(secret)
    this.verifiers = [this.signer, ...accepted.filter((s) => s !== secret).map(signerOf)]
  }

  private expiry(seconds: number): number {
    return Math.floor(this.clock() / 1000) + seconds
  }

  signAccess(userId: string, orgId: string, sessionId: string): Promise<string> {
    return this.signer.sign({
      sub: userId,
      org: orgId,
      sid: sessionId,
      typ: 'access',
      exp: this.expiry(tokenLifetimes.accessSeconds),
    })
  }

  /** Returns the token and its expiry in epoch ms, so the store can keep the same deadline. */
  async signRefresh(userId: string, jti: string): Promise<{ token: string; expiresAt: number }> {
    const exp = this.expiry(tokenLifetimes.refreshSeconds)
    return { token: await this.signer.sign({ sub: userId, jti, typ: 'refresh', exp }), expiresAt: exp * 1000 }
  }

  private async verify(token: string): Promise<Record<string, unknown> | undefined> {
    for (const verifier of this.verifiers) {
      const payload = await verifier.verify(token, {
        algorithms: ['HS256'],
        requiredClaims: ['exp', 'iat'],
        currentDate: new Date(this.clock()),
      })
      if (payload) return payload
    }
    return undefined
  }

  async verifyAccess(token: string): Promise<AccessClaims | undefined> {
    const p = await this.verify(token)
    if (
      p?.typ !== 'access' ||
      typeof p.sub !== 'string' ||
      typeof p.org !== 'string' ||
      typeof p.sid !== 'string' ||
      typeof p.iat !== 'number'
    ) {
      return undefined
    }
    return { sub: p.sub, org: p.org, sid: p.sid, typ: 'access', iat: p.iat }
  }

  async verifyRefresh(token: string): Promise<RefreshClaims | undefined> {
    const p = await this.verify(token)
    if (p?.typ !== 'refresh' || typeof p.sub !== 'string' || typeof p.jti !== 'string') return undefined
    return { sub: p.sub, jti: p.jti, typ: 'refresh' }
  }
}
