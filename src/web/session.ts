// Who is signed in: GET /auth/me once at start (the cookies carry the session), then whatever sign-in,
// sign-up, verification and sign-out set. Components read it with useSession().
import { createContext } from 'preact'
import { useContext } from 'preact/hooks'

export interface Me {
  user: { id: string; email: string; name: string; role?: string; email_verified: boolean } & Record<string, unknown>
  organization: { id: string; name: string; slug: string; plan: string; verified: boolean }
}

export interface Session {
  me: Me | null
  /** Re-reads /auth/me (after sign-in, verification, sign-out); resolves with the new value. */
  refresh(): Promise<Me | null>
}

export const SessionContext = createContext<Session>({ me: null, refresh: async () => null })

export const useSession = () => useContext(SessionContext)
