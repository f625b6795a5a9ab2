// SECURITY DEFINER functions without a search_path of their own (pg_proc.proconfig; pgwatch's
// reco_sprocs_wo_search_path): such a function runs with its owner's rights but resolves names through
// the caller's search_path, so a caller who may create objects in a schema on that path (or in pg_temp,
// searched first for tables) can put an operator, a function or a table there that the function then
// uses with its owner's rights: PostgreSQL's documentation, "Writing SECURITY DEFINER Functions Safely".
// Owned by a superuser: critical (a way to become one); else a warning. Functions of extensions are left
// out by the collector. The fix finds the function by schema, name and argument list (all through
// pgString) and writes its ALTER FUNCTION with format() (psql's \gexec), so no monitored text is SQL.
import { commentText, pgIdent, pgObject, pgString } from '../../../sql-text.ts'
import type { DefinerFunction } from '../../../../../shared/wire.ts'
import type { FindingDraft, Rule } from '../../../types.ts'

const defaults = {
  /** Functions named one finding each; the rest are counted in one more. */
  max_findings: 20,
}

/** `schema.name(args)` as a finding names the function (the argument list as PostgreSQL writes it, one line). */
export const functionObject = (f: DefinerFunction) => `${pgObject(f.schema, f.name)}(${commentText(f.args, 500)})`

/** The WHERE clause that finds exactly this function in pg_proc p joined with pg_namespace n. */
const which = (f: DefinerFunction) =>
  `n.nspname = ${pgString(f.schema)} AND p.proname = ${pgString(f.name)} AND pg_get_function_identity_arguments(p.oid) = ${pgString(f.args)}`

export const definerSearchPath: Rule<typeof defaults> = {
  id: 'pg_definer_search_path',
  engine: 'postgres',
  category: 'security',
  summary:
    'SECURITY DEFINER functions without a fixed search_path (pg_proc.proconfig), named schema.function(args): critical when a superuser owns them.',
  collectors: ['security'],
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(definerSearchPath)
    const found = await ctx.security()
    if (!found || found.status.definer_functions.length === 0) return []
    const all = found.status.definer_functions
    const findings: FindingDraft[] = []
    for (const f of all.slice(0, t.max_findings)) {
      const fn = functionObject(f)
      findings.push({
        severity: f.owner_superuser ? 'critical' : 'warning',
        object: fn,
        title: `${fn}: SECURITY DEFINER without a fixed search_path`,
        detail:
          `${fn} runs with the rights of its owner ${pgIdent(f.owner)}${f.owner_superuser ? ' (a superuser)' : ''} but finds tables, functions and operators through the caller's search_path. ` +
          "A caller who may create objects in a schema on that path (public before PostgreSQL 15, or pg_temp, which is searched first for tables) can place an object of the same name there and have the function use it with the owner's rights" +
          `${f.owner_superuser ? ': a way for any such caller to become a superuser' : ''}.`,
        recommendation:
          'Give the function a search_path of its own: the schemas it really uses, trusted ones only, with pg_temp last; or qualify every name in its body with its schema. Revoke EXECUTE from PUBLIC if only some roles should call it.',
        how_to_investigate: [
          `SELECT p.oid::regprocedure, pg_get_userbyid(p.proowner) AS owner, p.proconfig, has_function_privilege('public', p.oid, 'EXECUTE') AS public_may_call FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE ${which(f)};`,
          `SELECT pg_get_functiondef(p.oid) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE ${which(f)};   -- the names its body uses`,
        ],
        how_to_fix: [
          `SELECT format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp', p.oid::regprocedure, n.nspname) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE ${which(f)} /* in psql; add the other schemas it uses, pg_temp last */ \\gexec`,
        ],
        metrics: { owner: f.owner, owner_superuser: f.owner_superuser ? 1 : 0 },
        as_of: found.ts,
      })
    }
    const rest = all.slice(t.max_findings)
    if (rest.length > 0) {
      findings.push({
        severity: rest.some((f) => f.owner_superuser) ? 'critical' : 'warning',
        title: `${rest.length}${all.length >= 1000 ? ' or more' : ''} more SECURITY DEFINER functions without a search_path of their own`,
        detail: `Besides the functions named above, ${rest.length} more SECURITY DEFINER functions have no search_path of their own.`,
        recommendation: 'Give each a search_path of its own (trusted schemas, pg_temp last).',
        how_to_investigate: [
          "SELECT p.oid::regprocedure, pg_get_userbyid(p.proowner) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE p.prosecdef AND n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema' AND NOT EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search\\_path=%') ORDER BY 1;",
        ],
        how_to_fix: [],
        objects: rest.slice(0, 100).map(functionObject),
        metrics: { functions: rest.length },
        as_of: found.ts,
      })
    }
    return findings
  },
}
