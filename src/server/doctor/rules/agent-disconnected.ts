// The agent stopped sending (or never sent) data for this database: every other finding is then based
// on old numbers, or on none. The agent is heard from by its batches and by its reports that the database
// is down (store/availability/): a database the agent reports down is database_unreachable's, never this
// rule's, also when the agent goes silent after reporting it down (one alert for the outage: that finding
// then says the agent is silent and its state is as last reported).
// A restart of `dbm serve` (an upgrade) is no agent's fault: agents buffer while no serve runs and come
// back at their next retry round. A silence that began before this process started is judged only once
// the restart grace (limits.ts restartGraceMs) has passed since the start, counted from then, unless it
// was judged before the stop (its alert is open: it stays open rather than resolving and reopening).
// Under `dbm local` the agent runs in the server's own process on the DSNs of its command line, with no
// config file and no health address: the advice is to give the database's DSN to dbm local (a database of
// an earlier run keeps its history but is watched only when named again) and to read its start lines.
import { databaseDefaults, restartGraceMs, silentAfterMs } from '../../limits.ts'
import { lastHeardAt } from '../../store/availability/types.ts'
import { NAME_MAX_CHARS } from '../../../shared/database-limits.ts'
import { commentText } from '../sql-text.ts'
import type { RegisteredDatabase } from '../../store/types.ts'
import { type Rule, duration } from '../types.ts'

const defaults = {
  /** Disconnected after max(3 × poll interval, this many seconds) without a batch: the health status rule (views.ts). */
  min_silence_s: databaseDefaults.connectedFloorMs / 1000,
}

/** A host or database name as it may stand in a pasted shell command (letters, digits, `.-_%:[]`), else the placeholder. */
const shellSafe = (text: string | undefined, placeholder: string) =>
  text && /^[A-Za-z0-9._%:[\]-]{1,200}$/.test(text) ? text : placeholder

/** The command that watches this database under dbm local, its DSN's user (and the rest, where not safe to paste) left to fill in. */
function localCommand(db: RegisteredDatabase): string {
  const scheme = db.engine === 'clickhouse' ? 'clickhouse' : 'postgres'
  // dbm local names a database host:port/database from its DSN.
  const database = /\/([^/]*)$/.exec(db.name)?.[1]
  return `dbm local ${scheme}://<user>@${shellSafe(db.host, '<host>')}:${db.port}/${shellSafe(database, '<database>')}`
}

/** What a dbm local user reads and does: the start lines of dbm local, and its command with the DSN. */
const LOCAL_INVESTIGATE = [
  'the lines dbm local printed at start: one per DSN, "ok" with the collectors, or what failed (a malformed DSN, a refused connection, a role without rights)',
  "dbm local --log-level debug <the same DSNs>   # its agent's log, in the same output",
]

export const agentDisconnected: Rule<typeof defaults> = {
  id: 'agent_disconnected',
  summary:
    'The agent stopped sending (or never sent) data for this database, so every other finding rests on old numbers or none.',
  collectors: [],
  engine: 'any',
  category: 'availability',
  thresholds: defaults,
  async check(ctx) {
    const { db, now } = ctx
    const reported = await ctx.availability()
    if (db.last_seen_at === null && !reported) {
      if (ctx.setup.local) {
        return [
          {
            severity: 'warning',
            title: 'No data from the agent yet',
            detail: `dbm has not received any telemetry for "${db.name}" since it was registered ${duration(now - db.created_at)} ago.`,
            recommendation:
              "dbm local watches the databases whose DSNs are on its command line, and shows the first data within about 15 seconds. Stop it (Ctrl-C) and start it again with this database's DSN; if its start line reports an error, fix the DSN or the role's rights (docs/postgresql-setup.md) and start it again.",
            how_to_investigate: LOCAL_INVESTIGATE,
            how_to_fix: [`${localCommand(db)}   # with the DSNs of the other databases you watch`],
            metrics: { last_seen_at: null },
          },
        ]
      }
      return [
        {
          severity: 'warning',
          title: 'No data from the agent yet',
          detail: `dbm has not received any telemetry for "${db.name}" since it was registered ${duration(now - db.created_at)} ago.`,
          recommendation: 'Start dbm agent with this database in its config.yaml and an API key of this organization.',
          how_to_investigate: ['dbm agent --check --config config.yaml', 'curl http://<agent health address>/healthz'],
          how_to_fix: [
            `dbm agent --config config.yaml   # with a databases entry named "${commentText(db.name, NAME_MAX_CHARS)}"`,
          ],
          metrics: { last_seen_at: null },
        },
      ]
    }
    if (reported?.state === 'down') return []
    const { min_silence_s } = ctx.thresholds(agentDisconnected)
    const heard = lastHeardAt(db, reported) ?? 0
    const silence = now - heard
    const silentAfter = silentAfterMs(db.poll_interval_seconds, min_silence_s * 1000)
    if (silence <= silentAfter) return []
    const servingSince = ctx.setup.servingSince
    if (
      servingSince !== undefined &&
      heard < servingSince &&
      now - (servingSince + restartGraceMs(db.poll_interval_seconds)) <= silentAfter
    ) {
      const open = await ctx.store.monitor.listAlerts(db.id, 'open', 100)
      if (
        !open.some(
          (a) => a.rule === agentDisconnected.id || a.consequences.some((c) => c.rule === agentDisconnected.id),
        )
      )
        return []
    }
    // The store refused writes (its disk full...), or this process shed batches for want of room (a fleet
    // catching up after a restart): the agent's batches were answered 503 and it kept them, so a silence
    // that began while that went on is the server's, not the agent's (the server logs both). Judged again
    // once it ended and the agents had a restart's grace to deliver what they kept.
    for (const refusals of [ctx.setup.storeRefusals, ctx.setup.ingestShedding]) {
      if (
        refusals &&
        heard >= refusals.since - silentAfter &&
        (refusals.endedAt === undefined ||
          now - (refusals.endedAt + restartGraceMs(db.poll_interval_seconds)) <= silentAfter)
      )
        return []
    }
    if (ctx.setup.local) {
      return [
        {
          severity: 'critical',
          title: 'The agent has stopped sending data',
          detail: `Nothing from dbm local's agent for "${db.name}" (no batch, no availability report) for ${duration(silence)} (poll interval ${db.poll_interval_seconds} s); the other findings describe the database as it was then.`,
          recommendation:
            "dbm local watches only the DSNs given to the run in progress: a database of an earlier run keeps its history but is not watched unless its DSN is given again. Restart dbm local (Ctrl-C, then the command) with this database's DSN among the others; if its start line then reports an error, check the DSN and the role (docs/postgresql-setup.md).",
          how_to_investigate: LOCAL_INVESTIGATE,
          how_to_fix: [`${localCommand(db)}   # with the DSNs of the other databases you watch`],
          metrics: { last_seen_s_ago: Math.round(silence / 1000), poll_interval_seconds: db.poll_interval_seconds },
        },
      ]
    }
    return [
      {
        severity: 'critical',
        title: 'The agent has stopped sending data',
        detail: `Nothing from the agent for "${db.name}" (no batch, no availability report) for ${duration(silence)} (poll interval ${db.poll_interval_seconds} s); the other findings describe the database as it was then.`,
        recommendation:
          'Check that the agent is running and can reach both the database and this server; its /healthz names the failing side.',
        how_to_investigate: [
          'curl http://<agent health address>/healthz',
          'dbm agent --check --config config.yaml',
          'journalctl -u dbm-agent --since "1 hour ago"   # or the agent pod\'s logs',
        ],
        how_to_fix: ['systemctl restart dbm-agent   # or: kubectl rollout restart deployment/dbm-agent'],
        metrics: { last_seen_s_ago: Math.round(silence / 1000), poll_interval_seconds: db.poll_interval_seconds },
      },
    ]
  },
}
