// The agent stopped sending (or never sent) data for this database: every other finding is then based
// on old numbers, or on none. The agent is heard from by its batches and by its reports that the database
// is down (sql-availability.ts): a database the agent reports down is database_unreachable's, never this
// rule's, also when the agent goes silent after reporting it down (one alert for the outage: that finding
// then says the agent is silent and its state is as last reported).
import { databaseDefaults, silentAfterMs } from '../../limits.ts'
import { lastHeardAt } from '../../store/sql-availability.ts'
import { commentText } from '../sql-text.ts'
import { type Rule, duration } from '../types.ts'

const defaults = {
  /** Disconnected after max(3 × poll interval, this many seconds) without a batch: the health status rule (views.ts). */
  min_silence_s: databaseDefaults.connectedFloorMs / 1000,
}

export const agentDisconnected: Rule<typeof defaults> = {
  id: 'agent_disconnected',
  engine: 'any',
  category: 'availability',
  thresholds: defaults,
  async check(ctx) {
    const { db, now } = ctx
    const reported = await ctx.availability()
    if (db.last_seen_at === null && !reported) {
      return [
        {
          severity: 'warning',
          title: 'No data from the agent yet',
          detail: `dbm has not received any telemetry for "${db.name}" since it was registered ${duration(now - db.created_at)} ago.`,
          recommendation: 'Start dbm agent with this database in its config.yaml and an API key of this organization.',
          how_to_investigate: ['dbm agent --check --config config.yaml', 'curl http://<agent health address>/healthz'],
          how_to_fix: [`dbm agent --config config.yaml   # with a databases entry named "${commentText(db.name, 200)}"`],
          metrics: { last_seen_at: null },
        },
      ]
    }
    if (reported?.state === 'down') return []
    const { min_silence_s } = ctx.thresholds(agentDisconnected)
    const heard = lastHeardAt(db, reported) ?? 0
    const silence = now - heard
    if (silence <= silentAfterMs(db.poll_interval_seconds, min_silence_s * 1000)) return []
    return [
      {
        severity: 'critical',
        title: 'The agent has stopped sending data',
        detail: `Nothing from the agent for "${db.name}" (no batch, no availability report) for ${duration(silence)} (poll interval ${db.poll_interval_seconds} s); the other findings describe the database as it was then.`,
        recommendation: 'Check that the agent is running and can reach both the database and this server; its /healthz names the failing side.',
        how_to_investigate: ['curl http://<agent health address>/healthz', 'dbm agent --check --config config.yaml', 'journalctl -u dbm-agent --since "1 hour ago"   # or the agent pod\'s logs'],
        how_to_fix: ['systemctl restart dbm-agent   # or: kubectl rollout restart deployment/dbm-agent'],
        metrics: { last_seen_s_ago: Math.round(silence / 1000), poll_interval_seconds: db.poll_interval_seconds },
      },
    ]
  },
}
