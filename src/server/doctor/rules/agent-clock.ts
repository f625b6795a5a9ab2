// The agent's clock is far from the server's (issue 29 d6). The server measures it at every batch
// (store/agent-clock/: collected_at plus the batch's age against its receipt time, the largest measure of
// a few minutes, since every delay only makes it smaller). What a skewed clock does: the agent dates
// its cycles by it, so statement and counter minutes, session snapshots and events sit that far off on
// every chart, and past ingestClockSkewMs ahead the server refuses its batches. Which snapshot is the
// latest no longer depends on it (store/snapshots.ts orders them by the server's clock). A measure older
// than two windows is not judged: the agent is silent, which agent_disconnected reports.
// Only a clock ahead is reported: a delay can make a clock read behind but never ahead, and a batch
// that merely arrives late without saying its age (an older agent's, a resent one after a restart, a
// cycle stuck on a slow database) reads exactly like a clock behind. Telling those apart needs the
// agent's own clock at send time on every batch, which the wire does not carry yet.
import { agentClockLimits, ingestClockSkewMs } from '../../limits.ts'
import type { Rule } from '../types.ts'

const defaults = {
  /** Reported when the agent's clock is this many seconds ahead of the server's. */
  max_offset_s: agentClockLimits.reportAfterMs / 1000,
}

export const agentClockSkew: Rule<typeof defaults> = {
  id: 'agent_clock_skew',
  summary:
    "The agent's clock is ahead of the server's: its data are dated that far in the future on every chart, and past 10 minutes its batches are refused.",
  collectors: [],
  engine: 'any',
  category: 'reliability',
  thresholds: defaults,
  ranges: { max_offset_s: { min: 1, max: ingestClockSkewMs / 1000, whole: true } },
  async check(ctx) {
    const clock = await ctx.store.agentClocks.agentClock(ctx.db.id)
    if (!clock || ctx.now - clock.measured_at > 2 * agentClockLimits.windowMs) return []
    const { max_offset_s } = ctx.thresholds(agentClockSkew)
    const seconds = Math.round(clock.offset_ms / 1000)
    if (seconds < max_offset_s) return []
    return [
      {
        severity: 'warning',
        as_of: clock.measured_at,
        title: `The agent's clock is ${seconds} s ahead of the server's`,
        detail:
          `The agent that watches "${ctx.db.name}" dates its data by its own clock, which is ${seconds} s ahead of this server's: ` +
          'statement and counter minutes, session snapshots and events show that much later than they happened, ' +
          `and once it is more than ${ingestClockSkewMs / 60_000} minutes ahead this server refuses its batches.`,
        recommendation:
          "Keep the agent's host in time with NTP (chrony or systemd-timesyncd); once its clock is right this finding clears within a few minutes.",
        how_to_investigate: [
          'timedatectl status   # on the agent host',
          'chronyc tracking   # if chrony keeps the time',
        ],
        how_to_fix: ['sudo timedatectl set-ntp true   # on the agent host'],
        metrics: { offset_s: seconds, max_offset_s },
      },
    ]
  },
}
