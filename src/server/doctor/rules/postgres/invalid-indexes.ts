// Invalid indexes (pg_index.indisvalid false), PgHero's invalid_indexes: what a failed CREATE INDEX
// CONCURRENTLY or REINDEX CONCURRENTLY leaves behind. The planner never uses one, writes may still
// maintain it, and an invalid unique index still rejects new duplicates. An index being built
// concurrently right now is invalid too until its build ends: when the agent's `progress` section (the
// latest snapshot, no older than the activity the doctor reads) shows its CREATE INDEX or REINDEX running,
// the finding is a note saying so, with the build's phase, and no command that would undo it. When the
// build waits for a session (the progress entry's blocker), the note names it in metric blocker_pid and
// is listed in that session's issue.
// A unique index whose build failed on duplicate values fails again on REINDEX CONCURRENTLY, leaving a
// second invalid copy (`<name>_ccnew`): its fix resolves the duplicates first, drops the index (and any
// such leftover, named in its finding rather than in one of its own) and creates it again.
import type { ProgressEntry } from '../../../../shared/wire.ts'
import type { IndexRow } from '../../../store/objects/types.ts'
import type { FindingDraft, Rule } from '../../types.ts'
import { pgIdent, pgIndexDefinition, pgQualified, pgRegclass, pgObject } from '../../sql-text.ts'
import { parseIndexDef } from './duplicate-indexes.ts'

const defaults = {
  /** Indexes named one finding each; the rest are counted in one more. */
  max_findings: 10,
}

/** A GROUP BY that lists duplicate keys of a unique index over plain columns; undefined otherwise. */
function duplicatesQuery(def: string, table: string): string | undefined {
  const shape = parseIndexDef(def)
  if (!shape || shape.predicate) return undefined
  // Each key a plain column, bare or quoted as pg_get_indexdef writes it, written again through pgIdent.
  const columns = shape.columns.map(
    (c) => /^"((?:[^"]|"")+)"$/.exec(c)?.[1]?.replaceAll('""', '"') ?? (/^[a-z_][a-z0-9_$]*$/.test(c) ? c : undefined),
  )
  if (columns.some((c) => c === undefined)) return undefined
  const cols = columns.map((c) => pgIdent(c!)).join(', ')
  return `SELECT ${cols}, count(*) FROM ${table} GROUP BY ${cols} HAVING count(*) > 1 LIMIT 20;   -- the duplicates that made the build fail`
}

export const invalidIndexes: Rule<typeof defaults> = {
  id: 'pg_invalid_indexes',
  summary:
    'Invalid indexes left behind by a failed CREATE INDEX CONCURRENTLY or REINDEX CONCURRENTLY: never used by the planner, still maintained.',
  collectors: ['indexes'],
  engine: 'postgres',
  category: 'schema',
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(invalidIndexes)
    const all = (await ctx.indexes())
      .filter((i) => !i.is_valid)
      .sort((a, b) => (a.schema_name + a.index_name < b.schema_name + b.index_name ? -1 : 1))
    // REINDEX CONCURRENTLY's leftovers (`<name>_ccnew`, `<name>_ccnew1`...) of an index that is also invalid.
    const leftoversOf = (i: IndexRow) =>
      all.filter(
        (o) =>
          o !== i &&
          o.schema_name === i.schema_name &&
          o.table_name === i.table_name &&
          /^_ccnew\d*$/.test(o.index_name.slice(i.index_name.length)) &&
          o.index_name.startsWith(i.index_name),
      )
    const leftovers = new Set(all.flatMap(leftoversOf))
    const invalid = all.filter((i) => !leftovers.has(i))
    // Builds running at the latest snapshot of the progress views, by the index they build.
    const progress = invalid.length > 0 ? await ctx.store.latestSnapshot(ctx.db.id, 'progress') : undefined
    const builds = (Array.isArray(progress?.payload) ? (progress.payload as ProgressEntry[]) : []).filter(
      (p) => p.index_name !== null && /^(CREATE INDEX|REINDEX)/.test(p.command),
    )
    const buildOf = (i: IndexRow) =>
      builds.find((p) => p.index_name === i.index_name && (p.schema_name === null || p.schema_name === i.schema_name))

    const findings: FindingDraft[] = invalid.slice(0, t.max_findings).map((i) => {
      const name = pgQualified(i.schema_name, i.index_name)
      const table = pgQualified(i.schema_name, i.table_name)
      const duplicates = i.is_unique && i.index_def ? duplicatesQuery(i.index_def, table) : undefined
      const extra = leftoversOf(i)
      const extraNames = extra.map((o) => pgQualified(o.schema_name, o.index_name))
      const definition = pgIndexDefinition(i.index_def, { concurrently: true })
      const recreate = definition ? [`${definition};`] : []
      const build = buildOf(i)
      if (build) {
        const done = build.percent === null ? '' : `, ${build.percent.toFixed(1)} % of its ${build.unit ?? 'work'}`
        // The session the build waits for (pid 0 would be a prepared transaction, no session): the note is
        // then a consequence of that session, in its issue (grouping.ts reads metric blocker_pid).
        const blocker = build.blocker && build.blocker.pid > 0 ? build.blocker.pid : null
        const note: FindingDraft = {
          severity: 'info',
          object: pgObject(i.schema_name, i.index_name),
          objects: [
            pgObject(i.schema_name, i.index_name),
            pgObject(i.schema_name, i.table_name),
            ...(blocker === null ? [] : [`pid ${blocker}`]),
          ],
          title: `Index ${name} is being built`,
          detail:
            `${name} on ${table} is invalid because ${build.command} (pid ${build.pid}) is still building it: phase "${build.phase}"${done}. ` +
            (blocker === null
              ? 'It becomes valid when the build ends; a build waiting in "waiting for old snapshots" or "waiting for writers" waits for the transactions named in the progress view.'
              : `It waits for pid ${blocker}, and becomes valid once that session's transaction has ended and the build is done.`),
          recommendation:
            'Let the build finish. If it waits long, end what it waits for (see the xmin horizon and lock chains); if it fails, this turns into an invalid index to rebuild.',
          how_to_investigate: [
            `SELECT pid, phase, lockers_total, lockers_done, current_locker_pid, blocks_done, blocks_total FROM pg_stat_progress_create_index WHERE pid = ${build.pid};`,
            `GET /api/v1/databases/${ctx.db.id}/progress   -- the builds the agent saw`,
          ],
          how_to_fix: [],
          metrics: {
            is_unique: i.is_unique ? 1 : 0,
            size_bytes: i.size_bytes,
            build_pid: build.pid,
            build_phase: build.phase,
            build_percent: build.percent,
            blocker_pid: blocker,
          },
        }
        return note
      }
      const finding: FindingDraft = {
        severity: 'warning',
        object: pgObject(i.schema_name, i.index_name),
        objects: [
          pgObject(i.schema_name, i.index_name),
          ...extra.map((o) => pgObject(o.schema_name, o.index_name)),
          pgObject(i.schema_name, i.table_name),
        ],
        title: `Invalid index ${name}`,
        detail:
          `${i.is_unique ? 'The unique index' : 'The index'} ${name} on ${table} is marked invalid: queries never use it${i.is_unique ? ', yet it still rejects new duplicate values' : ''}, and writes to ${table} may still maintain it. A failed CREATE INDEX CONCURRENTLY or REINDEX CONCURRENTLY leaves such an index behind.` +
          (extra.length > 0
            ? ` A failed REINDEX CONCURRENTLY of it also left ${extraNames.join(', ')}, invalid as well.`
            : ''),
        recommendation: i.is_unique
          ? `Unless a concurrent build of it is running right now, resolve the duplicate values first (a rebuild fails again on them, leaving another invalid copy), then drop it${extra.length > 0 ? ' and its leftovers' : ''} and create it again.`
          : `Unless a concurrent build of it is running right now, rebuild it, or drop it and create it again.${extra.length > 0 ? ' Drop the leftovers of the failed rebuild too.' : ''}`,
        how_to_investigate: [
          'SELECT pid, phase, blocks_done, blocks_total FROM pg_stat_progress_create_index;   -- a build still running?',
          `SELECT indisvalid, indisready, pg_get_indexdef(indexrelid) FROM pg_index WHERE indexrelid = ${pgRegclass(i.schema_name, i.index_name)};`,
          ...(duplicates ? [duplicates] : []),
        ],
        how_to_fix: i.is_unique
          ? [
              `-- first delete or change the rows with duplicate keys${duplicates ? ' (the GROUP BY query above lists them)' : ''}: else the build fails again`,
              ...extraNames.map((o) => `DROP INDEX CONCURRENTLY ${o};   -- left by a failed REINDEX CONCURRENTLY`),
              `DROP INDEX CONCURRENTLY ${name};`,
              ...recreate,
            ]
          : [
              ...extraNames.map((o) => `DROP INDEX CONCURRENTLY ${o};   -- left by a failed REINDEX CONCURRENTLY`),
              `REINDEX INDEX CONCURRENTLY ${name};`,
              `-- or: DROP INDEX CONCURRENTLY ${name};${definition ? ` then ${definition};` : ''}`,
            ],
        metrics: { is_unique: i.is_unique ? 1 : 0, size_bytes: i.size_bytes },
      }
      return finding
    })

    const rest = invalid.slice(t.max_findings)
    if (rest.length > 0) {
      findings.push({
        severity: 'warning',
        title: `${rest.length} more invalid indexes`,
        detail: `Besides the indexes named above, ${rest.length} more indexes are invalid: ${rest
          .slice(0, 20)
          .map((i) => pgObject(i.schema_name, i.index_name))
          .join(', ')}${rest.length > 20 ? ', ...' : ''}.`,
        recommendation: 'Rebuild or drop each of them.',
        how_to_investigate: ['SELECT indexrelid::regclass, indrelid::regclass FROM pg_index WHERE NOT indisvalid;'],
        how_to_fix: ['REINDEX INDEX CONCURRENTLY <schema>.<index>;   -- for each one'],
        objects: rest.slice(0, 100).map((i) => pgObject(i.schema_name, i.index_name)),
        metrics: { indexes: rest.length },
      })
    }
    return findings
  },
}
