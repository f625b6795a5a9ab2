// What holds back a PostgreSQL database's xmin horizon, named for the findings that follow from it
// (dead rows VACUUM cannot remove, wraparound it cannot freeze away, the horizon itself): a session's
// transaction or snapshot, a standby's hot_standby_feedback through a WAL sender, a replication slot's
// xmin or catalog_xmin, a prepared transaction. From the agent's xmin_holders section when the latest
// batch carried it, else from the database_stats gauges older agents send (a pid, a slot age, a
// prepared transaction's age: the session is then looked up in the activity snapshot, slots in the
// replication section). Each holder comes with what ends it, in words and as commands; text from the
// monitored database reaches the commands only through sql-text.ts, and the prose as plain text.
import type { XminHolder } from '../../shared/wire.ts'
import type { DoctorContext } from './context.ts'
import { terminateSession } from './session-commands.ts'
import { commentText, pgNumber, pgString } from './sql-text.ts'
import { duration } from './types.ts'

export type HolderKind = 'backend' | 'walsender' | 'slot' | 'prepared'

export interface Holder {
  kind: HolderKind
  /** Age in XIDs of the xmin it holds back for tables' cleanup; null when it holds back the system catalogs only (a logical slot's catalog_xmin). */
  dataAge: number | null
  /** Age in XIDs it holds back freezing (a slot's catalog_xmin included). */
  freezeAge: number
  /** The latest time by which it held its present xmin (epoch ms); null when unknown. */
  since: number | null
  /** Seconds since its transaction began (a session) or was prepared, when the data was collected; null when unknown. */
  ageS: number | null
  /** Its name as a finding's object: `pid 3161`, `slot name`, `prepared transaction gid`. */
  object: string
  /** Short, for a title: `pid 3161`, `replication slot "name"`, `prepared transaction 'gid'` (quoted as a string). */
  name: string
  /** Who it is, in full: the session's user, application, state, transaction age and statement; the slot's type and state. */
  about: string
  /** What has to happen for the horizon to move: `pid 3161 ends its transaction`. */
  ends: string
  /** What to do about it, in words. */
  advice: string
  /** Commands that end it (with their cautions as comments). */
  fix: string[]
  /** Queries that show it. */
  investigate: string[]
  /** Values naming it in a finding's metrics. */
  metrics: Record<string, number | string | null>
}

const short = (text: string, max = 200) => (text.length > max ? `${text.slice(0, max)}…` : text)
const num = (v: number | null | undefined) => (typeof v === 'number' ? v : null)
/** Seconds from `start` to `at`, when both are known. */
const ageAt = (at: number, start: number | null) => (start === null ? null : Math.max(0, (at - start) / 1000))

const ACTIVITY_OF =
  'SELECT pid, datname, usename, application_name, client_addr, backend_type, state, now() - xact_start AS transaction_age, now() - state_change AS in_state_for, age(backend_xid) AS xid_age, age(backend_xmin) AS xmin_age, query FROM pg_stat_activity WHERE backend_xid IS NOT NULL OR backend_xmin IS NOT NULL ORDER BY greatest(age(backend_xid), age(backend_xmin)) DESC LIMIT 10;'
const SLOTS_OF =
  'SELECT slot_name, slot_type, database, active, active_pid, xmin, age(xmin) AS xmin_age, catalog_xmin, age(catalog_xmin) AS catalog_xmin_age FROM pg_replication_slots ORDER BY greatest(age(xmin), age(catalog_xmin)) DESC NULLS LAST;'
const PREPARED_OF =
  'SELECT gid, prepared, owner, database, age(transaction) AS xid_age FROM pg_prepared_xacts ORDER BY prepared;'

/** A session's description: `pid 3161 (user app, application "psql", idle in transaction; transaction open for 22.0 min; last statement: ...)`. */
function sessionAbout(pid: number, s: SessionInfo, ageS: number | null): string {
  const who =
    [
      s.user && `user ${s.user}`,
      s.application_name && `application "${s.application_name}"`,
      s.client_addr && `from ${s.client_addr}`,
    ]
      .filter(Boolean)
      .join(', ') || 'unknown session'
  const open = ageS !== null ? `; transaction open for ${duration(ageS * 1000)}` : ''
  const statement =
    typeof s.query_text === 'string'
      ? `; ${s.state === 'active' ? 'running' : 'last statement'}: ${short(s.query_text)}`
      : ''
  return `pid ${pid} (${who}, ${s.state ?? 'state unknown'}${open}${statement})`
}

/** What the activity snapshot or the holder section says of a session. */
interface SessionInfo {
  user?: string | null
  application_name?: string | null
  client_addr?: string | null
  state?: string | null
  xact_start?: number | null
  backend_start?: number | null
  query_text?: string | null
}

function backendHolder(
  h: {
    pid: number
    age: number
    since: number | null
    ageS: number | null
    session: SessionInfo | undefined
    walsender: boolean
    seenAt: number
  },
  _now: number,
): Holder {
  const { pid, age, since, ageS, session } = h
  if (h.walsender) {
    const standby = session?.application_name
      ? ` (application "${session.application_name}"${session.client_addr ? ` from ${session.client_addr}` : ''})`
      : ''
    return {
      kind: 'walsender',
      dataAge: age,
      freezeAge: age,
      since,
      ageS: null,
      object: `pid ${pid}`,
      name: `the standby behind WAL sender pid ${pid}`,
      about: `WAL sender pid ${pid}${standby}, relaying the hot_standby_feedback of a standby: the oldest snapshot of a query running there`,
      ends: `the standby behind WAL sender pid ${pid} finishes its oldest query`,
      advice:
        'A standby with hot_standby_feedback = on keeps the primary from removing rows its queries still read. Find and end the long query on the standby, move long reports elsewhere, or turn the feedback off there (its queries may then be cancelled by replication conflicts instead).',
      fix: [
        `SELECT pid, now() - xact_start AS transaction_age, state, left(query, 100) FROM pg_stat_activity WHERE backend_xmin IS NOT NULL ORDER BY age(backend_xmin) DESC LIMIT 5;   -- on the standby${session?.application_name ? ` ${commentText(session.application_name, 60)}` : ''}: the queries it protects; end them with pg_terminate_backend(pid) there`,
        'ALTER SYSTEM SET hot_standby_feedback = off; SELECT pg_reload_conf();   -- on the standby, if its queries may be cancelled instead',
      ],
      investigate: [
        'SELECT pid, application_name, client_addr, state, backend_xmin, age(backend_xmin) AS xmin_age FROM pg_stat_replication ORDER BY age(backend_xmin) DESC NULLS LAST;',
        ACTIVITY_OF,
      ],
      metrics: { held_by: `pid ${pid}`, holder_kind: 'walsender', holder_xmin_age: age, holder_since: since },
    }
  }
  const about = session
    ? sessionAbout(pid, session, ageS)
    : `pid ${pid} (not a client session: a WAL sender relaying a standby's hot_standby_feedback, or a background worker)`
  return {
    kind: 'backend',
    dataAge: age,
    freezeAge: age,
    since,
    ageS,
    object: `pid ${pid}`,
    name: `pid ${pid}`,
    about,
    ends: `pid ${pid} ends its transaction`,
    advice:
      'Finish or end that transaction: commit or roll it back from the application, or end the session. A report or an export belongs on a replica; idle_in_transaction_session_timeout and statement_timeout stop the next one.',
    fix: [
      terminateSession(
        { ...session, pid },
        {
          seenAt: h.seenAt,
          effect:
            'ends that session and rolls back its open transaction (its uncommitted work is lost: check with its owner first)',
        },
      ),
    ],
    investigate: [
      `SELECT pid, usename, application_name, client_addr, state, now() - xact_start AS transaction_age, now() - state_change AS in_state_for, backend_xid, backend_xmin, query FROM pg_stat_activity WHERE pid = ${pgNumber(pid)};`,
      ACTIVITY_OF,
    ],
    metrics: { held_by: `pid ${pid}`, holder_kind: 'backend', holder_xmin_age: age, holder_since: since },
  }
}

function slotHolder(h: XminHolder, name: string): Holder {
  const dataAge = num(h.xmin_age)
  const catalogAge = num(h.catalog_xmin_age)
  const freezeAge = Math.max(dataAge ?? 0, catalogAge ?? 0)
  const kind = `${h.slot_type ?? 'replication'} slot`
  const holds =
    dataAge !== null
      ? `xmin ${dataAge.toLocaleString('en-US')} transactions old`
      : `catalog_xmin ${(catalogAge ?? 0).toLocaleString('en-US')} transactions old (the system catalogs only)`
  const active = h.active === true
  return {
    kind: 'slot',
    dataAge,
    freezeAge,
    since: num(h.since),
    ageS: null,
    object: `slot ${name}`,
    name: `replication slot "${name}"`,
    about: `${kind} "${name}" (${active ? `active${typeof h.pid === 'number' ? `, WAL sender pid ${h.pid}` : ''}` : 'inactive'}${h.database ? `, database ${h.database}` : ''}; ${holds})`,
    ends: active
      ? `replication slot "${name}" moves on (its standby's oldest query ends)`
      : `replication slot "${name}" is dropped or its consumer comes back`,
    advice: active
      ? "The slot's standby sends hot_standby_feedback: its longest query holds the horizon here. End that query on the standby, or turn hot_standby_feedback off there."
      : 'An inactive slot keeps the xmin its consumer last sent for as long as it exists. Drop it if that consumer (a decommissioned standby, a stopped CDC connector) is gone for good, or bring the consumer back.',
    fix: active
      ? [
          'ALTER SYSTEM SET hot_standby_feedback = off; SELECT pg_reload_conf();   -- on the standby, if its queries may be cancelled instead',
        ]
      : [
          `SELECT pg_drop_replication_slot(${pgString(name)});   -- only once its consumer is gone for good: a standby or subscriber using it must then be rebuilt`,
        ],
    investigate: [SLOTS_OF],
    metrics: {
      held_by: `slot ${name}`,
      holder_kind: 'slot',
      holder_xmin_age: dataAge ?? catalogAge,
      holder_since: num(h.since),
    },
  }
}

function preparedHolder(
  h: {
    gid: string | null
    owner?: string | null
    age: number
    since: number | null
    preparedAt: number | null
    ageS: number | null
  },
  now: number,
): Holder {
  const named = h.gid !== null
  // The gid is any text its author chose: quoted as a string, so it cannot forge the title around it.
  const label = named ? `prepared transaction ${pgString(h.gid!)}` : 'the oldest prepared transaction'
  return {
    kind: 'prepared',
    dataAge: h.age,
    freezeAge: h.age,
    since: h.since,
    ageS: h.ageS,
    object: named ? `prepared transaction ${h.gid}` : 'prepared transaction',
    name: label,
    about: `${label} (PREPARE TRANSACTION, two-phase commit${h.owner ? `, owner ${h.owner}` : ''}${h.preparedAt !== null ? `, prepared ${duration(Math.max(0, now - h.preparedAt))} ago` : ''}; ${h.age.toLocaleString('en-US')} transactions old)`,
    ends: `${label} is committed or rolled back`,
    advice:
      'A prepared transaction waits for its transaction manager to COMMIT PREPARED or ROLLBACK PREPARED it, across restarts, keeping its locks. If that manager has forgotten it, decide with its owner which of the two to run.',
    fix: named
      ? [
          `ROLLBACK PREPARED ${pgString(h.gid!)};   -- in this database; write COMMIT PREPARED instead to keep its changes`,
        ]
      : [
          "SELECT format('ROLLBACK PREPARED %L;', gid) FROM pg_prepared_xacts WHERE database = current_database() ORDER BY prepared LIMIT 1 \\gexec",
        ],
    investigate: [PREPARED_OF],
    metrics: {
      held_by: named ? `prepared transaction ${h.gid}` : 'prepared transaction',
      holder_kind: 'prepared',
      holder_xmin_age: h.age,
      holder_since: h.since,
    },
  }
}

/**
 * The holders of the database's xmin horizon, the oldest first (by the age they hold back freezing); a
 * backend no older than a prepared transaction is left out: a snapshot taken while it was pending has
 * its XID as xmin, a bystander rather than a holder. Empty when nothing holds it or nothing is known.
 */
export function xminHolders(ctx: DoctorContext): Promise<Holder[]> {
  return ctx.once('xmin_holders:named', async () => {
    const [stats, named, activity] = await Promise.all([ctx.databaseStats(), ctx.xminHolders(), ctx.activity()])
    const sessions = new Map(activity.entries.map((a) => [Number(a.pid), a]))
    const holders: Holder[] = []
    // The named section of the same batch as the gauges (or a later one); an older one is stale.
    if (named && (!stats || named.ts >= stats.ts)) {
      for (const h of named.entries) {
        const age = num(h.xmin_age)
        if (h.kind === 'slot' && h.slot_name) holders.push(slotHolder(h, h.slot_name))
        else if (h.kind === 'prepared' && age !== null) {
          const preparedAt = num(h.prepared_at)
          holders.push(
            preparedHolder(
              {
                gid: h.gid ?? null,
                owner: h.owner,
                age,
                since: num(h.since),
                preparedAt,
                ageS: ageAt(named.ts, preparedAt),
              },
              ctx.now,
            ),
          )
        } else if ((h.kind === 'backend' || h.kind === 'walsender') && age !== null && typeof h.pid === 'number') {
          // The activity snapshot carries the statement whole; the section's own copy is shortened.
          const seen = sessions.get(h.pid)
          const session: SessionInfo = seen && (seen.xact_start ?? null) === (h.xact_start ?? null) ? seen : h
          holders.push(
            backendHolder(
              {
                pid: h.pid,
                age,
                since: num(h.since),
                ageS: ageAt(named.ts, num(h.xact_start)),
                session,
                walsender: h.kind === 'walsender',
                seenAt: named.ts,
              },
              ctx.now,
            ),
          )
        }
      }
    } else if (stats) {
      const s = stats.payload
      const at = stats.ts
      const pid = num(s.xmin_backend_pid)
      const backendAge = num(s.xmin_backend_age)
      if (pid !== null && backendAge !== null) {
        const session = sessions.get(pid)
        // The session's last state change (idle in a transaction) or statement start, from the activity snapshot.
        const since =
          session && typeof session.duration_ms === 'number' && activity.ts !== null
            ? activity.ts - session.duration_ms
            : null
        holders.push(
          backendHolder(
            {
              pid,
              age: backendAge,
              since,
              ageS: num(s.xmin_backend_xact_age_s),
              session,
              walsender: false,
              seenAt: at,
            },
            ctx.now,
          ),
        )
      }
      const slotAge = num(s.xmin_slot_age)
      if (slotAge !== null) {
        const slots = (await ctx.replication())?.payload.slots ?? []
        const inactive = slots.filter((sl) => !sl.active)
        for (const sl of inactive.length > 0 ? inactive : slots) {
          holders.push(
            slotHolder(
              { kind: 'slot', xmin_age: slotAge, slot_name: sl.slot_name, slot_type: sl.slot_type, active: sl.active },
              sl.slot_name,
            ),
          )
        }
      }
      const preparedAge = num(s.xmin_prepared_age)
      if (preparedAge !== null) {
        const preparedFor = num(s.xmin_prepared_age_s)
        const preparedAt = preparedFor === null ? null : at - preparedFor * 1000
        holders.push(
          preparedHolder({ gid: null, age: preparedAge, since: preparedAt, preparedAt, ageS: preparedFor }, ctx.now),
        )
      }
    }
    const preparedAge = Math.max(-1, ...holders.filter((h) => h.kind === 'prepared').map((h) => h.freezeAge))
    return holders
      .filter((h) => !(h.kind === 'backend' && h.freezeAge <= preparedAge))
      .sort((a, b) => b.freezeAge - a.freezeAge)
  })
}

/**
 * The holder that keeps VACUUM from removing a table's dead rows: the oldest holder of the tables'
 * horizon, when the table's last VACUUM finished after it was already holding (so that VACUUM left
 * every row deleted since). Undefined when nothing holds it, or when no VACUUM has run since.
 */
export async function heldBy(ctx: DoctorContext, lastVacuum: number | null): Promise<Holder | undefined> {
  const oldest = await oldestDataHolder(ctx)
  if (!oldest || oldest.since === null || lastVacuum === null) return undefined
  return lastVacuum >= oldest.since ? oldest : undefined
}

/** The oldest holder of the tables' horizon (catalog-only holders left out), if any. */
export async function oldestDataHolder(ctx: DoctorContext): Promise<Holder | undefined> {
  return (await xminHolders(ctx)).filter((h) => h.dataAge !== null).sort((a, b) => b.dataAge! - a.dataAge!)[0]
}
