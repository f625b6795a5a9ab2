// The agent's clock is far from the server's (issue 29 d6), ahead or behind. The server measures it
// at every batch that says when the agent sent it (store/agent-clock/: the agent's clock at sending
// against the receipt time, the largest measure of a few minutes, since the network and the server's
// queue only make it smaller; a slow cycle or a batch resent from the buffer does not enter it). What a
// skewed clock does: the agent dates its cycles by it, so statement and counter minutes, session
// snapshots and events sit that far off on every chart, and past ingestClockSkewMs ahead the server
// refuses its batches. Which snapshot is the latest no longer depends on it (store/snapshots.ts orders
// them by the server's clock). A measure older than two windows is not judged: the agent is silent,
// which agent_disconnected reports. An agent older than X-Dbm-Sent-At measures nothing and is not judged.
import { agentClockLimits, ingestClockSkewMs } from '../../limits.ts'
import type { Rule } from '../types.ts'

const defaults = {
  /** Reported when the agent's clock is this many seconds ahead of the server's, or behind it. */
  max_offset_s: agentClockLimits.reportAfterMs / 1000,
}

export const agentClockSkew: Rule<typeof defaults> = {
  id: 'agent_clock_skew',
  summary:
    "The agent's clock is ahead of the server's or behind it: its data are dated that far off on every chart, and past 10 minutes ahead its batches are refused (then agent_disconnected reports the silence).",
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
    if (Math.abs(seconds) < max_offset_s) return []
    const ahead = seconds > 0
    const by = `${Math.abs(seconds)} s ${ahead ? 'ahead of' : 'behind'}`
    return [
      {
        severity: 'warning',
        as_of: clock.measured_at,
        title: `The agent's clock is ${by} the server's`,
        detail:
          `The agent that watches "${ctx.db.name}" dates its data by its own clock, which is ${by} this server's: ` +
          `statement and counter minutes, session snapshots and events show that much ${ahead ? 'later' : 'earlier'} than they happened` +
          (ahead
            ? `, and once it is more than ${ingestClockSkewMs / 60_000} minutes ahead this server refuses its batches.`
            : ', and the latest minutes of a chart look empty until the data dated in them arrive.'),
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
