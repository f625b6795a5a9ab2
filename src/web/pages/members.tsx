// The organization's members on the settings page (GET /organization/members for everyone; owners also
// change roles, remove members, invite addresses and revoke pending invites; removing or demoting
// someone first lists the API keys they created, which the server revokes with it), the line members see where
// owners manage API keys and the webhook, and the page of an invitation link (#/accept-invite?token=…:
// the invitee chooses a name and password and is signed in).
import type { Static } from '@sinclair/typebox'
import { useState } from 'preact/hooks'
import { ApiError, api } from '../api.ts'
import { Async, ago, fmtTime, useApi, useConfirmation } from '../components/ui.tsx'
import { navigate } from '../router.ts'
import { useSession } from '../session.ts'
import { VerifyNote } from './db/common.tsx'
import type { Invite, Member } from '../../shared/api/organization.ts'
import type { ApiKey } from '../../shared/api/api-keys.ts'

type MemberRow = Static<typeof Member>
type KeyRow = Static<typeof ApiKey>
type InviteRow = Static<typeof Invite>
type Role = MemberRow['role']

/** The server's answer to a used, revoked or expired link (routes/organization.ts INVALID_INVITE). */
const INVALID_INVITE = 'invalid, used, revoked or expired invite token'
const MIN_PASSWORD = 8

export const isOwner = (role: string | undefined) => role === 'owner'

/** What a member sees where owners manage something (API keys, the webhook). */
export function OwnersOnly({ what }: { what: string }) {
  return (
    <p class="muted" data-owners-only>
      Only the organization's owners manage {what}. Ask one of them (see the members on the{' '}
      <a href="#/settings">settings page</a>).
    </p>
  )
}

/** The live API keys `member` created (or that were made with theirs): revoked with their removal or demotion. */
const keysOf = (keys: readonly KeyRow[] | undefined, member: MemberRow) =>
  keys?.filter((k) => k.created_by?.id === member.id && k.revoked_at === null)

/** What a removal or demotion revokes, said before it is confirmed: the keys by name, prefix, scopes and last use. */
function KeysToRevoke({ keys, who }: { keys: readonly KeyRow[] | undefined; who: string }) {
  if (keys === undefined)
    return <span class="small">The API keys {who.toLowerCase()} created are revoked with it.</span>
  if (keys.length === 0) return <span class="small">{who} created no API keys.</span>
  return (
    <span class="small stack" data-keys-to-revoke style="flex-basis:100%">
      <span>
        {keys.length === 1 ? 'This API key' : `These ${keys.length} API keys`} {who.toLowerCase()} created will be
        revoked with it (agents using {keys.length === 1 ? 'it' : 'them'} are refused from their next request):
      </span>
      <ul>
        {keys.map((k) => (
          <li key={k.id} data-revoked-key={k.name}>
            <strong>{k.name}</strong> <code>{k.prefix}</code> — scopes {k.scopes.join(', ') || 'none'}, last used{' '}
            {ago(k.last_used_at)}
          </li>
        ))}
      </ul>
    </span>
  )
}

function RoleChange({
  member,
  keys,
  self,
  onChanged,
}: {
  member: MemberRow
  keys: readonly KeyRow[] | undefined
  self: boolean
  onChanged(): void
}) {
  const { confirming, open, close, busy, error, run, opener, cancelButton } = useConfirmation()
  const next: Role = member.role === 'owner' ? 'member' : 'owner'
  const label = `Make ${member.name} ${next === 'owner' ? 'an owner' : 'a member'}`
  const change = () =>
    run(async () => {
      await api('PATCH', `/organization/members/${encodeURIComponent(member.id)}`, { role: next })
      close()
      onChanged()
    })
  // Promoting takes one click; demoting an owner revokes their keys, so it is said (and listed) first.
  if (next === 'owner' || !confirming) {
    return (
      <>
        <button
          type="button"
          ref={opener}
          onClick={next === 'owner' ? change : open}
          disabled={busy}
          aria-label={label}
        >
          {next === 'owner' ? 'Make owner' : 'Make member'}
        </button>
        {error && (
          <span class="error" role="alert">
            {error}
          </span>
        )}
      </>
    )
  }
  return (
    <span class="row" style="justify-content:flex-end;flex-wrap:wrap" role="group" aria-label={`${label}?`}>
      <KeysToRevoke keys={keysOf(keys, member)} who={self ? 'You' : 'They'} />
      <button type="button" class="danger" disabled={busy} onClick={change}>
        {busy ? 'Changing…' : 'Make member now'}
      </button>
      <button type="button" ref={cancelButton} onClick={close} disabled={busy}>
        Cancel
      </button>
      {error && (
        <span class="error" role="alert">
          {error}
        </span>
      )}
    </span>
  )
}

function RemoveMember({
  member,
  keys,
  self,
  onRemoved,
}: {
  member: MemberRow
  keys: readonly KeyRow[] | undefined
  self: boolean
  onRemoved(): void
}) {
  const { confirming, open, close, busy, error, run, opener, cancelButton } = useConfirmation()
  const remove = () =>
    run(async () => {
      await api('DELETE', `/organization/members/${encodeURIComponent(member.id)}`)
      close()
      onRemoved()
    })
  if (!confirming) {
    return (
      <button type="button" ref={opener} onClick={open} aria-label={`Remove ${member.name}`}>
        {self ? 'Leave' : 'Remove'}
      </button>
    )
  }
  return (
    <span
      class="row"
      style="justify-content:flex-end;flex-wrap:wrap"
      role="group"
      aria-label={`Remove ${member.name}?`}
    >
      <KeysToRevoke keys={keysOf(keys, member)} who={self ? 'You' : 'They'} />
      <span class="small">
        {self
          ? 'Your account is deleted and you are signed out at once.'
          : 'Their account is deleted and they are signed out at once.'}
      </span>
      <button type="button" class="danger" disabled={busy} onClick={remove}>
        {busy ? 'Removing…' : 'Remove now'}
      </button>
      <button type="button" ref={cancelButton} onClick={close} disabled={busy}>
        Cancel
      </button>
      {error && (
        <span class="error" role="alert">
          {error}
        </span>
      )}
    </span>
  )
}

function InviteForm({ onInvited }: { onInvited(): void }) {
  const [email, setEmail] = useState('')
  const [role, setRole] = useState<Role>('member')
  const [state, setState] = useState<{ busy?: boolean; sent?: string; error?: string }>({})
  const submit = async (e: Event) => {
    e.preventDefault()
    setState({ busy: true })
    try {
      const invite = await api('POST', '/organization/invites', { email: email.trim(), role })
      setState({
        sent: `Invitation sent to ${invite.email} (by mail; without SMTP its link is in the server log); it works once, for 7 days.`,
      })
      setEmail('')
      onInvited()
    } catch (err) {
      setState({
        error:
          err instanceof ApiError && err.status === 429
            ? `Too many invitations: ${err.message.replace(/^too many requests; /, '')}.`
            : (err as Error).message,
      })
    }
  }
  return (
    <form class="form-row" onSubmit={submit} aria-label="Invite someone">
      <div class="field" style="flex:1 1 18rem">
        <label for="invite-email">Email address</label>
        <input
          id="invite-email"
          type="email"
          required
          maxLength={254}
          value={email}
          autoComplete="off"
          onInput={(e) => setEmail((e.currentTarget as HTMLInputElement).value)}
        />
      </div>
      <div class="field">
        <label for="invite-role">Role</label>
        <select
          id="invite-role"
          value={role}
          onChange={(e) => setRole((e.currentTarget as HTMLSelectElement).value as Role)}
        >
          <option value="member">member</option>
          <option value="owner">owner</option>
        </select>
      </div>
      <button type="submit" class="primary" disabled={state.busy}>
        {state.busy ? 'Inviting…' : 'Invite'}
      </button>
      {state.sent && (
        <p class="success" role="status" style="flex-basis:100%">
          {state.sent}
        </p>
      )}
      {state.error && (
        <p class="error" role="alert" style="flex-basis:100%">
          {state.error}
        </p>
      )}
    </form>
  )
}

function RevokeInvite({ invite, onRevoked }: { invite: InviteRow; onRevoked(): void }) {
  const [error, setError] = useState('')
  const revoke = async () => {
    try {
      await api('DELETE', `/organization/invites/${encodeURIComponent(invite.id)}`)
      onRevoked()
    } catch (e) {
      setError((e as Error).message)
    }
  }
  return (
    <>
      <button type="button" onClick={revoke} aria-label={`Revoke the invitation of ${invite.email}`}>
        Revoke
      </button>
      {error && (
        <span class="error" role="alert">
          {error}
        </span>
      )}
    </>
  )
}

function PendingInvites({ invites, reload }: { invites: InviteRow[]; reload(): void }) {
  if (invites.length === 0) return <p class="muted small">No pending invitations.</p>
  return (
    <div class="table-wrap">
      <table>
        <thead>
          <tr>
            <th scope="col">Email</th>
            <th scope="col">Role</th>
            <th scope="col">Invited by</th>
            <th scope="col">Expires</th>
            <th scope="col" class="num">
              <span class="sr-only">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {invites.map((i) => (
            <tr key={i.id} data-invite={i.email}>
              <td>{i.email}</td>
              <td>{i.role}</td>
              <td>{i.invited_by?.name ?? <span class="muted">a former member</span>}</td>
              <td title={fmtTime(i.expires_at)}>{fmtTime(i.expires_at)}</td>
              <td class="num">
                <RevokeInvite invite={i} onRevoked={reload} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  )
}

/** The Members section of the settings page: a read-only list for members, everything for owners. */
export function MembersSection() {
  const { me, refresh } = useSession()
  const owner = isOwner(me?.user.role)
  const members = useApi('/organization/members')
  const invites = useApi(owner ? '/organization/invites' : null)
  // The organization's live keys, for what a removal or demotion revokes (owners only may list them).
  const keys = useApi(owner ? '/api-keys' : null)
  const changed = (self: boolean) => {
    members.reload()
    keys.reload()
    // A change of one's own role or membership changes what the pages offer.
    if (self) void refresh()
  }
  return (
    <div class="stack">
      <Async loaded={members}>
        {(list) => (
          <div class="table-wrap">
            <table aria-label="Members">
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Email</th>
                  <th scope="col">Role</th>
                  <th scope="col">Joined</th>
                  {owner && (
                    <th scope="col" class="num">
                      <span class="sr-only">Actions</span>
                    </th>
                  )}
                </tr>
              </thead>
              <tbody>
                {list.map((m) => (
                  <tr key={m.id} data-member={m.email}>
                    <td>
                      {m.name}
                      {m.id === me?.user.id && <span class="muted"> (you)</span>}
                    </td>
                    <td>{m.email}</td>
                    <td data-role>{m.role}</td>
                    <td title={fmtTime(m.created_at)}>{ago(m.created_at)}</td>
                    {owner && (
                      <td class="num">
                        <span class="row" style="justify-content:flex-end">
                          <RoleChange
                            member={m}
                            keys={keys.data}
                            self={m.id === me?.user.id}
                            onChanged={() => changed(m.id === me?.user.id)}
                          />
                          <RemoveMember
                            member={m}
                            keys={keys.data}
                            self={m.id === me?.user.id}
                            onRemoved={() => changed(m.id === me?.user.id)}
                          />
                        </span>
                      </td>
                    )}
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </Async>
      {owner ? (
        <>
          <h3>Invite someone</h3>
          <p class="small muted">
            An owner manages everything, API keys, the webhook, the members and what is collected included; a member
            sees the databases and may change their host, port and tags (through the API). Removing or demoting an owner
            revokes the API keys they created. dbm mails the address a link to join (or logs it, without SMTP).
          </p>
          {me?.organization.verified ? (
            <InviteForm onInvited={invites.reload} />
          ) : (
            <VerifyNote message="Invitations are available once your organization is verified: open the link of the verification mail." />
          )}
          <h3>Pending invitations</h3>
          <Async loaded={invites}>{(list) => <PendingInvites invites={list} reload={invites.reload} />}</Async>
        </>
      ) : (
        <OwnersOnly what="members and invitations" />
      )}
    </div>
  )
}

/** The page of an invitation link: name and password, then signed in and on the databases page. */
export function AcceptInvite({ token }: { token: string }) {
  const { me, refresh } = useSession()
  const [name, setName] = useState('')
  const [password, setPassword] = useState('')
  const [state, setState] = useState<{ busy?: boolean; error?: string; invalid?: boolean }>({})
  const submit = async (e: Event) => {
    e.preventDefault()
    setState({ busy: true })
    try {
      await api('POST', '/auth/accept-invite', { token, name, password })
      await refresh()
      navigate('/databases')
    } catch (err) {
      const message = (err as Error).message
      setState({ error: message, invalid: message === INVALID_INVITE })
    }
  }
  return (
    <main class="narrow">
      <div class="panel stack">
        <h1>Join your team on dbm</h1>
        {!token ? (
          <p class="error" role="alert">
            This link has no token. Open the link from the invitation mail as it is.
          </p>
        ) : state.invalid ? (
          <p class="error" role="alert" data-invite-invalid>
            This invitation link is invalid, already used, revoked or expired (links work once, for 7 days). Ask the
            owner who invited you for a new one.
          </p>
        ) : (
          <>
            <p class="muted">
              Choose your name and a password: the invitation names your email address, which is verified by this link.
            </p>
            {me && (
              <p class="notice small" role="status">
                You are signed in as {me.user.email}: joining signs you in as the invited address instead.
              </p>
            )}
            <form class="form" onSubmit={submit}>
              <div class="field">
                <label for="invite-name">Your name</label>
                <input
                  id="invite-name"
                  name="name"
                  required
                  maxLength={200}
                  autoComplete="name"
                  value={name}
                  onInput={(e) => setName((e.currentTarget as HTMLInputElement).value)}
                />
              </div>
              <div class="field">
                <label for="invite-password">Password</label>
                <input
                  id="invite-password"
                  name="password"
                  type="password"
                  required
                  minLength={MIN_PASSWORD}
                  autoComplete="new-password"
                  value={password}
                  aria-describedby="invite-password-hint"
                  onInput={(e) => setPassword((e.currentTarget as HTMLInputElement).value)}
                />
                <span class="hint" id="invite-password-hint">
                  At least {MIN_PASSWORD} characters.
                </span>
              </div>
              {state.error && (
                <p class="error" role="alert">
                  {state.error}
                </p>
              )}
              <button type="submit" class="primary" disabled={state.busy}>
                {state.busy ? 'Joining…' : 'Join'}
              </button>
            </form>
          </>
        )}
        <p class="small">
          Already have an account? <a href="#/signin">Sign in</a>
        </p>
      </div>
    </main>
  )
}
