// Cancel and terminate on the Active page (owners only): a session's button opens a confirmation that
// names its pid, role, application and statement; confirming asks the agent (POST /actions) and shows
// the outcome as it comes (GET /actions/{aid} every second): signalled, nothing signalled (that session
// had ended or moved on), refused or failed with the reason, or expired. When the database's agent does not
// allow the action (allow_actions), the confirmation offers the same guarded command to run by hand
// instead (src/shared/session-commands.ts, a module of pure text functions the doctor uses too, so that the
// command is the doctor's exactly), with a note saying how to allow it. Every text from the monitored
// database goes through DbText or Code.
import type { Static } from '@sinclair/typebox'
import { useEffect, useState } from 'preact/hooks'
import { cancelStatement, terminateSession } from '../../../shared/session-commands.ts'
import type { ActionView } from '../../../shared/api/actions.ts'
import { api } from '../../api.ts'
import { DbText } from '../../components/invisible.tsx'
import { Code, useApi } from '../../components/ui.tsx'
import { apiPath } from './common.tsx'
import type { Database, Session } from './types.ts'

export type Action = Static<typeof ActionView>
export type KillKind = 'cancel' | 'terminate'
export interface KillTarget {
  session: Session
  kind: KillKind
}

const ms = (value: string | null | undefined) => (value ? Date.parse(value) : null)

/** The guarded command for the session, as the doctor writes it. */
export function killCommand(kind: KillKind, s: Session): string {
  const reported = {
    pid: s.pid,
    user: s.user ?? null,
    application_name: s.application_name ?? null,
    backend_start: ms(s.backend_start),
    xact_start: ms(s.xact_start),
    query_start: ms(s.query_start),
  }
  return kind === 'cancel'
    ? cancelStatement(reported, { effect: 'cancels the statement it runs', seenAt: ms(s.ts) })
    : terminateSession(reported, { effect: 'rolls back its transaction and ends the session', seenAt: ms(s.ts) })
}

/** What the database's agent allows, refreshed when asked. */
export function useAllowedActions(db: Database, enabled: boolean) {
  return useApi(enabled ? apiPath(db, '/actions') : null)
}

/** The action, re-read every second until it settled. */
function useAction(db: Database, id: string | undefined): Action | undefined {
  const [action, setAction] = useState<Action>()
  useEffect(() => {
    if (!id) return
    let stop = false
    let timer: ReturnType<typeof setTimeout>
    const read = async () => {
      try {
        const a = await api('GET', apiPath(db, `/actions/${id}`))
        if (stop) return
        setAction(a)
        if (a.state !== 'pending' && a.state !== 'running') return
      } catch {}
      if (!stop) timer = setTimeout(read, 1000)
    }
    void read()
    return () => {
      stop = true
      clearTimeout(timer)
    }
  }, [db.id, id])
  return action
}

const VERB: Record<KillKind, string> = { cancel: 'Cancel the statement', terminate: 'Terminate the session' }

export function outcomeText(a: Action): string {
  if (a.state === 'pending') return 'Waiting for the agent…'
  if (a.state === 'running') return 'The agent is running it…'
  if (a.state === 'done')
    return a.signalled
      ? 'Done: the backend was signalled.'
      : 'Done: no backend was signalled; that session had ended or moved on to another statement.'
  if (a.state === 'expired') return 'Expired: the agent did not take it in time; it was not run.'
  return a.state === 'refused' ? 'Refused by the agent.' : 'Failed.'
}

/** The confirmation, then the outcome, of a cancel or terminate. */
export function KillPanel({
  db,
  target,
  allowed,
  onClose,
}: {
  db: Database
  target: KillTarget
  allowed: readonly string[] | null | undefined
  onClose: () => void
}) {
  const { session: s, kind } = target
  const [asked, setAsked] = useState<string>()
  const [error, setError] = useState<string>()
  const action = useAction(db, asked)
  const command = killCommand(kind, s)
  const permitted = allowed === null || allowed === undefined || allowed.includes(kind)
  const confirm = async () => {
    setError(undefined)
    try {
      const a = await api('POST', apiPath(db, '/actions'), {
        kind,
        statement: s.query_text,
        session: {
          pid: s.pid,
          backend_start: s.backend_start,
          xact_start: s.xact_start ?? null,
          query_start: s.query_start ?? null,
          user: s.user ?? null,
          application_name: s.application_name ?? null,
        },
      })
      setAsked(a.id)
    } catch (e) {
      setError((e as Error).message)
    }
  }
  return (
    <section class="panel warning kill-panel" aria-label={VERB[kind]} data-kill-panel={kind}>
      <h2>
        {VERB[kind]} of pid {s.pid}?
      </h2>
      <dl class="kv small">
        <dt>Role</dt>
        <dd>
          <DbText text={s.user ?? '—'} />
        </dd>
        <dt>Application</dt>
        <dd>
          <DbText text={s.application_name || '—'} />
        </dd>
        <dt>Statement</dt>
        <dd class="mono stmt-text">
          <DbText text={s.query_text || '(none)'} />
        </dd>
      </dl>
      <p class="muted small">
        {kind === 'cancel'
          ? 'Cancelling ends the statement it runs (its transaction is rolled back if it has one open in that statement); the session stays.'
          : 'Terminating rolls back its open transaction and ends the session; the client sees its connection closed.'}{' '}
        Only a backend with this pid, start, role and application,{' '}
        {kind === 'cancel' ? 'still running this statement' : 'still in this transaction'}, is signalled.
      </p>
      {!permitted ? (
        <>
          <p class="small" data-not-allowed>
            The agent of this database does not allow {kind} (allow_actions in its config:{' '}
            {allowed!.join(', ') || 'none'}). Add <code>{kind}</code> to <code>allow_actions</code> in the database's
            entry of the agent config to run it from here (<code>dbm local</code> allows it), or run this as a role
            allowed to signal that session:
          </p>
          <Code text={command} />
          <button type="button" onClick={onClose}>
            Close
          </button>
        </>
      ) : asked === undefined ? (
        <div class="toolbar">
          <button type="button" class="danger" onClick={confirm} data-confirm-kill>
            {VERB[kind]}
          </button>
          <button type="button" onClick={onClose}>
            Keep it
          </button>
          {error && <span class="sev-critical small">{error}</span>}
        </div>
      ) : (
        <div data-kill-outcome={action?.state ?? 'pending'}>
          <p role="status">{action ? outcomeText(action) : 'Asking the agent…'}</p>
          {action?.reason && (
            <p class="small">
              <DbText text={action.reason} />
            </p>
          )}
          {action && (action.state === 'refused' || action.state === 'failed' || action.state === 'expired') && (
            <>
              <p class="muted small">The same command, to run by hand:</p>
              <Code text={command} />
            </>
          )}
          <button type="button" onClick={onClose}>
            Close
          </button>
        </div>
      )}
    </section>
  )
}
