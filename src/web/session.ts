// Who is signed in: GET /auth/me once at start (the cookies carry the session), then whatever sign-in,
// sign-up, verification and sign-out set. Components read it with useSession().
import { createContext } from 'preact'
import { useContext } from 'preact/hooks'
import type { Static } from '@sinclair/typebox'
import type { UserPrincipal } from '../shared/api/auth.ts'

/** GET /auth/me as the dashboard (signed in as a user) reads it. */
export type Me = Static<typeof UserPrincipal>

export interface Session {
  me: Me | null
  /** Re-reads /auth/me (after sign-in, verification, sign-out); resolves with the new value. */
  refresh(): Promise<Me | null>
}

export const SessionContext = createContext<Session>({ me: null, refresh: async () => null })

export const useSession = () => useContext(SessionContext)
