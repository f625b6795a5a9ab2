// Who a session is, for the title of a finding about it (idle in a transaction, running long, blocking
// others): `pid 3161, user app, application "psql", on public.orders`, so that two findings of the same
// kind and age read apart in a list, a mail subject or an alert. A title is one line shown everywhere
// (the dashboard, mails, webhooks, logs), so the names the monitored database reports are cut and any
// control, bidirectional or invisible character in them (a role may be named anything; PostgreSQL
// itself writes a non-ASCII application_name as \xNN) is written as its `\uXXXX` escape, visible.
import { HIDDEN_CHARACTERS } from '../../shared/invisible.ts'

const UNSHOWN = new RegExp(`[\\u0000-\\u001f\\u007f-\\u009f${HIDDEN_CHARACTERS}]`, 'gu')

const visibleEscape = (c: string) => {
  const code = c.codePointAt(0)!
  return code > 0xffff
    ? `\\u{${code.toString(16).toUpperCase()}}`
    : `\\u${code.toString(16).toUpperCase().padStart(4, '0')}`
}

/** `text` for a title: at most `max` characters (then `…`), every unsafe character as its visible escape. */
export function titleText(text: string, max: number): string {
  const chars = Array.from(text)
  const cut = chars.length > max ? `${chars.slice(0, max).join('')}…` : text
  return cut.replace(UNSHOWN, visibleEscape)
}

export interface TitledSession {
  pid: number | string
  user?: string | null
  application_name?: string | null
}

/** `pid 3161, user app, application "psql", on public.orders`: the parts known, the relation when there is one. */
export function sessionWho(s: TitledSession, relation?: string | null): string {
  const user = s.user ? `user ${titleText(s.user, 40)}` : undefined
  const application = s.application_name ? `application "${titleText(s.application_name, 40)}"` : undefined
  const on = relation ? `on ${titleText(relation, 60)}` : undefined
  return [`pid ${s.pid}`, user, application, on].filter(Boolean).join(', ')
}

/** The first relation (by name) of the locks a session holds, for its title; undefined when it holds none on a relation. */
export function firstHeldRelation(
  locks: readonly { pid: number; granted: boolean; relation_name?: string | null }[],
  pid: number,
): string | undefined {
  return locks
    .filter((l) => l.pid === pid && l.granted)
    .map((l) => l.relation_name)
    .filter((r): r is string => typeof r === 'string' && r !== '')
    .sort()[0]
}
