#!/usr/bin/env bun
// The dbm command line: parses arguments and hands over to `serve` or `agent`.
// Usage errors exit 2 with one line on stderr.
import { parseFlagLists, parseFlags } from './cli-args.ts'
import { UsageError, resolveServeConfig } from './server/config.ts'
import { type LogLevel, logLevels } from './shared/log.ts'
import { VERSION, versionText } from './version.ts'

const HELP = `dbm ${VERSION}: self-hosted monitoring for PostgreSQL and ClickHouse

Usage:
  dbm local <dsn>...    watch databases on this machine: dashboard and agent in one process
  dbm serve [flags]     run the API server (and dashboard)
  dbm agent [flags]     run the collectors for the databases in a config file
  dbm version           print the version
  dbm help              show this help

Run "dbm <command> --help" for a command's flags.
`

const SERVE_HELP = `Usage: dbm serve [flags]

Runs the REST API under /api/v1 and the web dashboard at /, with the health
monitor (alerts, recommendations, retention). Each setting is taken from its
flag, else its environment variable, else the default.

Flags:
  --listen HOST:PORT     address to listen on        DBM_LISTEN        (127.0.0.1:8080)
                         this machine only; 0.0.0.0:8080 opens it to the
                         network: set DBM_SIGNUP=closed first (see below)
  --data-dir DIR         data directory              DBM_DATA_DIR      (./dbm-data)
  --database-url URL     postgres:// store           DBM_DATABASE_URL  (unset: SQLite in the data dir)
  --public-url URL       base of links in mails      DBM_PUBLIC_URL    (http://localhost:8080)
  --log-level LEVEL      debug, info, warn, error    DBM_LOG_LEVEL     (info)
  -h, --help             show this help

Environment only:
  DBM_JWT_SECRET         token signing secret, at least 32 characters
                         (unset: generated once into the data dir, mode 0600)
  DBM_SMTP_URL           smtp:// or smtps:// relay (unset: mails go to the log)
  DBM_SMTP_FROM          sender address (dbm <dbm@localhost>)
  DBM_TRUST_PROXY        true: take the client address from X-Forwarded-For
  DBM_RETENTION_DAYS     telemetry retention of verified organizations (30)
  DBM_SIGNUP             open: anyone who reaches the server may sign up
                         (default); closed: only the first account, on an
                         empty store (set it before listening on the network)
  DBM_WEBHOOK_ALLOW_PRIVATE true: webhooks may go to loopback, private and
                         other internal addresses (unset: refused)
`

const AGENT_HELP = `Usage: dbm agent [flags]

Collects telemetry from the databases in a YAML config file and pushes it to the
dbm API. The config is --config, else $SERVICE_CONFIG, else ./config.yaml; edits
to it are applied while running (an invalid edit keeps the running config).

Flags:
  --config PATH          config file
  --check                validate the config, connect to every database once, print
                         what will be collected, exit 0 only if all succeeded
  --buffer-dir DIR       where service_buffer_<name>.db files go while the API is
                         unreachable (DBM_AGENT_BUFFER_DIR, default: working directory)
  --log-level LEVEL      debug, info, warn, error (DBM_LOG_LEVEL, info)
  -h, --help             show this help
`

const LOCAL_HELP = `Usage: dbm local <dsn> [<dsn>...] [flags]

Watches the given PostgreSQL (postgres://, postgresql://) and ClickHouse
(clickhouse://, tcp://, http://, https://) databases from one process: the API
and dashboard on embedded SQLite, plus the agent, with no signup and no mail.
Prints the dashboard's address and a sign-in link that works once, within 15
minutes; each DSN is checked as "dbm agent --check" does. A database that does
not answer yet is retried. Ctrl-C stops both; a later run keeps the history.

Plans: the agent explains the costliest statements (never runs them) when the
role that ran them and the objects they read are trusted. dbm local trusts each
PostgreSQL database's owner, superusers and its own role; connect with the
monitoring role of docs/postgresql-setup.md (pg_monitor,
pg_read_all_data) rather than as the owner, which hides other sessions' data.

Passwords: leave them out of the DSN (the command line is visible to every user
of the machine); they are taken from PGPASSWORD or ~/.pgpass (mode 0600) for
PostgreSQL, CLICKHOUSE_PASSWORD for ClickHouse.

Flags:
  --listen HOST:PORT     the dashboard's port: 127.0.0.1:PORT, [::1]:PORT or
                         localhost:PORT all bind PORT on both 127.0.0.1 and ::1,
                         which this run's random *.localhost name resolves to
                         (default: a free port)
  --open                 open the sign-in link in the desktop's browser (through
                         a file only you can read, never on a command line)
  --explain-trusted-role NAME
                         also explain statements of role NAME, and let its
                         functions run while plans are made (repeatable); the
                         owner of each PostgreSQL database is trusted already:
                         on your own database, its code is yours
  --data-dir DIR         store, secrets and agent buffers (Linux: $XDG_DATA_HOME/dbm
                         or ~/.local/share/dbm; macOS: ~/Library/Application
                         Support/dbm; Windows: %LOCALAPPDATA%\\dbm)
  --log-level LEVEL      debug, info, warn, error (DBM_LOG_LEVEL, info)
  -h, --help             show this help
`

const LOCAL_FLAGS = {
  values: ['listen', 'data-dir', 'log-level'],
  switches: ['help', 'open'],
  repeated: ['explain-trusted-role'],
} as const

const AGENT_FLAGS = { values: ['config', 'buffer-dir', 'log-level'], switches: ['help', 'check'] } as const

const SERVE_FLAGS = {
  values: ['listen', 'data-dir', 'database-url', 'public-url', 'log-level'],
  switches: ['help'],
} as const

/** `dbm local`'s DSNs (its arguments that are neither a flag nor a flag's value) apart from its flags. */
function splitDsns(argv: readonly string[], valueFlags: readonly string[]): { dsns: string[]; flagArgs: string[] } {
  const dsns: string[] = []
  const flagArgs: string[] = []
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (!arg.startsWith('-')) {
      dsns.push(arg)
      continue
    }
    flagArgs.push(arg)
    const name = /^--([a-z][a-z0-9-]*)$/.exec(arg)?.[1]
    if (name && valueFlags.includes(name) && i + 1 < argv.length) flagArgs.push(argv[++i]!)
  }
  return { dsns, flagArgs }
}

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv
  switch (command) {
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(HELP)
      return 0
    case 'version':
    case '--version':
      if (parseFlags('version', rest, { values: [], switches: ['help'] }).help) {
        process.stdout.write(
          "Usage: dbm version\n\nPrints the version of this dbm binary, the commit it was built from, the\nbuild date (UTC), the Bun runtime and the platform. Run from source, it says\nso and names the checkout's commit.\n",
        )
        return 0
      }
      process.stdout.write(versionText())
      return 0
    case 'serve': {
      const flags = parseFlags('serve', rest, SERVE_FLAGS)
      if (flags.help) {
        process.stdout.write(SERVE_HELP)
        return 0
      }
      // Each job loads only its own modules: the agent process does not carry the server's (and back).
      const { serve } = await import('./server/serve.ts')
      return serve(resolveServeConfig(flags, process.env))
    }
    case 'local': {
      const { dsns, flagArgs } = splitDsns(rest, [...LOCAL_FLAGS.values, ...LOCAL_FLAGS.repeated])
      const { flags, lists } = parseFlagLists('local', flagArgs, LOCAL_FLAGS)
      if (flags.help) {
        process.stdout.write(LOCAL_HELP)
        return 0
      }
      const { runLocal } = await import('./local/main.ts')
      return runLocal({ ...flags, 'explain-trusted-role': lists['explain-trusted-role'] }, dsns, process.env)
    }
    case 'agent': {
      const flags = parseFlags('agent', rest, AGENT_FLAGS)
      if (flags.help) {
        process.stdout.write(AGENT_HELP)
        return 0
      }
      if (flags['log-level'] !== undefined && !logLevels.includes(flags['log-level'] as LogLevel)) {
        throw new UsageError(`--log-level: expected one of ${logLevels.join(', ')}`)
      }
      const { runAgent } = await import('./agent/main.ts')
      return runAgent(flags, process.env, process.cwd())
    }
    default:
      throw new UsageError(`dbm: unknown command "${command}" (see dbm help)`)
  }
}

if (import.meta.main) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e) => {
      if (e instanceof UsageError) {
        process.stderr.write(`${e.message}\n`)
        process.exit(2)
      }
      process.stderr.write(`dbm: ${(e as Error)?.message ?? e}\n`)
      process.exit(1)
    },
  )
}
