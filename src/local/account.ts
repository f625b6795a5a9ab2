// The local organization and user of `dbm local`, created on the first run: verified (no signup, no
// mail), with a password nobody knows (the hash of random bytes that are thrown away), so the one-time
// link is the only way in. Each run starts by ending what earlier runs handed out (every session of the
// organization's users and every API key of the organization, whoever made it and whatever its name), so
// a session or key taken from an earlier run is worth nothing once the owner restarts; then it gives the
// agent a new API key, kept in memory.
import { generateApiKey } from '../server/auth/api-keys.ts'
import { hashPassword } from '../server/auth/passwords.ts'
import { randomToken } from '../server/auth/secrets.ts'
import type { Deps } from '../server/context.ts'
import type { User } from '../server/store/types.ts'

export const LOCAL_EMAIL = 'local@localhost'
export const AGENT_KEY_NAME = 'dbm local agent'

export class ForeignStoreError extends Error {}

/** The local user, created (and its organization) on the first run. */
export async function localUser(deps: Pick<Deps, 'store' | 'clock'>): Promise<User> {
  const { store } = deps
  let user: User | undefined = await store.findUserByEmail(LOCAL_EMAIL)
  if (!user) {
    if (await store.hasOrganization()) {
      throw new ForeignStoreError(
        'the data directory holds the store of a dbm serve (it has accounts but no local one); give dbm local a data directory of its own (--data-dir)',
      )
    }
    const created = await store.createAccount({
      org: { name: 'Local', slug: 'local', plan: 'free' },
      user: {
        email: LOCAL_EMAIL,
        name: 'Local user',
        passwordHash: await hashPassword(randomToken(32)),
        role: 'owner',
      },
      onlyFirst: true,
    })
    user = created.user
  }
  if (user.email_verified_at === null) await store.markEmailVerified(user.id, deps.clock())
  return user
}

/** Ends every session of the organization's users and revokes every API key of the organization. */
export async function endEarlierRuns(deps: Pick<Deps, 'store' | 'clock'>, user: User): Promise<void> {
  const { store } = deps
  for (const member of await store.members.listMembers(user.org_id))
    await store.revokeUserSessions(member.id, deps.clock())
  for (const key of await store.listApiKeys(user.org_id, false))
    await store.revokeApiKey(user.org_id, key.id, deps.clock())
}

/** A new API key of the user's organization for this run's agent (after endEarlierRuns). */
export async function agentKey(deps: Pick<Deps, 'store' | 'clock'>, user: User): Promise<string> {
  const { store } = deps
  const generated = generateApiKey()
  await store.createApiKey({
    id: Bun.randomUUIDv7(),
    org_id: user.org_id,
    key_id: generated.keyId,
    name: AGENT_KEY_NAME,
    secret_hash: generated.secretHash,
    scopes: ['ingest'],
    created_by: user.id,
    created_at: deps.clock(),
  })
  return generated.fullKey
}
