// The agent runs and reports that it cannot reach the database (store/availability/): one critical
// finding naming the failure's class and the driver's message, from the agent's first failed ping on,
// until the agent reports the database up again. An agent that goes silent during the outage does not
// resolve it: the finding stays, as last reported, and says since when the agent is silent (one alert for
// the outage; agent_disconnected stays quiet while the last report was "down").
// Under `dbm local` the agent is in the server's process and its DSNs are on the command line: the advice
// checks the DSN and the role there and restarts dbm local, never `dbm agent --check` or a config file.
import { databaseDefaults, silentAfterMs } from '../../limits.ts'
import { lastHeardAt } from '../../store/availability/types.ts'
import { causeText } from '../../store/availability/types.ts'
import { type Rule, duration } from '../types.ts'

const defaults = {
  /**
   * Not a condition of this rule: the agent counts as silent after max(3 × poll interval, this many seconds)
   * without a batch or a report (views.ts); the finding then says its state is as last reported.
   */
  agent_silence_s: databaseDefaults.connectedFloorMs / 1000,
}

const HOW_TO_INVESTIGATE: Record<string, string[]> = {
  postgres: [
    'pg_isready -h <host> -p <port>',
    'journalctl -u postgresql --since "1 hour ago"   # or the server log',
    'dbm agent --check --config config.yaml',
  ],
  clickhouse: [
    'curl http://<host>:8123/ping',
    'journalctl -u clickhouse-server --since "1 hour ago"   # or clickhouse-server.err.log',
    'dbm agent --check --config config.yaml',
  ],
}

const RECOMMENDATION: Record<string, string> = {
  refused:
    'Nothing accepts connections at the address: start the server (or check that it listens on this address and port).',
  timeout:
    'The server does not answer in time: check that it runs and is not overloaded, and the network and firewalls between the agent and it.',
  name_resolution: "The agent cannot resolve the server's host name: check the DSN's host and the agent host's DNS.",
  tls: "The TLS handshake fails: check the server's certificate and the DSN's sslmode / secure settings.",
  authentication:
    "The server refuses the agent's credentials: check the DSN's user and password (was the password changed?).",
  too_many_connections:
    'The server refuses new connections because its connection limit is reached: find what holds the connections, or raise the limit.',
  permission:
    "The agent's user may not connect to this database: grant it CONNECT (or the ClickHouse access it needs).",
  other: "Read the driver's message above and the server's log.",
}

/** Under dbm local: its start lines check each DSN as `dbm agent --check` does. */
const LOCAL_INVESTIGATE: Record<string, string[]> = {
  postgres: [
    'pg_isready -h <host> -p <port>',
    'psql "<the DSN given to dbm local>" -c "SELECT 1"   # the same DSN, user and password (PGPASSWORD or ~/.pgpass)',
    'the line dbm local printed at start for this DSN (restart it to check again: Ctrl-C, then the same command)',
  ],
  clickhouse: [
    'curl http://<host>:8123/ping',
    'the line dbm local printed at start for this DSN (restart it to check again: Ctrl-C, then the same command)',
  ],
}

export const databaseUnreachable: Rule<typeof defaults> = {
  id: 'database_unreachable',
  summary:
    "The agent runs but cannot reach the database: one critical finding naming the failure's class and the driver's message, until the agent reports it up again.",
  collectors: [],
  engine: 'any',
  category: 'availability',
  thresholds: defaults,
  async check(ctx) {
    const { db, now } = ctx
    const reported = await ctx.availability()
    if (reported?.state !== 'down') return []
    const { agent_silence_s } = ctx.thresholds(databaseUnreachable)
    const heard = lastHeardAt(db, reported)!
    const silent = now - heard > silentAfterMs(db.poll_interval_seconds, agent_silence_s * 1000)
    const engine = db.engine === 'clickhouse' ? 'ClickHouse' : 'PostgreSQL'
    // Ingest bounds `since` by the server's clock; a store written before that may hold a later one.
    const since = Math.min(reported.since, now)
    const cause = reported.cause ?? 'other'
    const dataAsOf =
      reported.data_as_of === null
        ? 'no data was collected before it'
        : `the data shown is as of ${new Date(reported.data_as_of).toISOString()}`
    const agent = silent
      ? `The agent went silent while the database was down: nothing heard from it since ${new Date(heard).toISOString()} (${duration(now - heard)}), so this is the state as last reported and dbm cannot see whether the database is back`
      : 'The agent itself is running and reports at every ping'
    return [
      {
        severity: 'critical',
        title: `${engine} is unreachable: ${causeText(cause)}${silent ? ' (as last reported; the agent is silent)' : ''}`,
        detail:
          `The agent cannot reach "${db.name}" (${db.host}:${db.port}) since ${new Date(since).toISOString()} (${duration(now - since)}): ` +
          `${reported.message ?? causeText(cause)}. ${agent}; ${dataAsOf}.`,
        recommendation: ctx.setup.local
          ? `${RECOMMENDATION[cause] ?? RECOMMENDATION.other!} The DSN and role are those given to dbm local on its command line (a password may come from PGPASSWORD or ~/.pgpass, a ClickHouse one from CLICKHOUSE_PASSWORD): fix what is wrong${silent ? ' and restart dbm local (Ctrl-C, then the command): its agent went silent with it, and until it reports, this alert stays open' : ", and dbm local's agent reconnects at its next ping (restart dbm local after changing the DSN)"}.`
          : `${RECOMMENDATION[cause] ?? RECOMMENDATION.other!}${silent ? ' Then start the agent again (its /healthz and log say why it stopped): until it reports, this alert stays open.' : ''}`,
        how_to_investigate: ctx.setup.local
          ? (LOCAL_INVESTIGATE[db.engine] ?? [])
          : [
              ...(HOW_TO_INVESTIGATE[db.engine] ?? []),
              ...(silent ? ['curl http://<agent health address>/healthz   # the agent: is it running?'] : []),
            ],
        // Nothing to paste: what to do depends on the cause, which the recommendation names.
        how_to_fix: [],
        // The report's own time: the finding is as current as the agent's latest ping.
        as_of: reported.reported_at,
        metrics: {
          down_since: since,
          cause,
          down_s: Math.round((now - since) / 1000),
          agent_silent_s: silent ? Math.round((now - heard) / 1000) : null,
        },
      },
    ]
  },
}
