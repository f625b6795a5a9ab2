// Schemas where every role (PUBLIC) may create objects (pgwatch's reco_default_public_schema): before
// PostgreSQL 15 the public schema of every database allowed it by default, and from 15 on only a GRANT
// gives it again. Any role that can connect may then place a table, function or operator in a schema
// that other roles' search_path reaches (public is on it by default), where their unqualified names find
// it: PostgreSQL's documentation, "Usage Patterns" of schemas (CVE-2018-1058). One finding per schema of
// the connected database. Schema names are the server's text: quoted through sql-text.ts.
import { pgIdent, pgString } from '../../../sql-text.ts'
import type { Rule } from '../../../types.ts'

const defaults = {}

const major = (version: string | null) => Number(/^\s*(\d+)/.exec(version ?? '')?.[1] ?? Number.NaN)

export const publicCreate: Rule<typeof defaults> = {
  id: 'pg_public_create',
  engine: 'postgres',
  category: 'security',
  summary:
    'Schemas where every role may create objects (CREATE for PUBLIC): public before PostgreSQL 15, or granted again after, with the REVOKE.',
  collectors: ['security'],
  thresholds: defaults,
  async check(ctx) {
    const found = await ctx.security()
    if (!found) return []
    const old = major(ctx.db.engine_version) < 15
    return found.status.public_create_schemas.map((schema) => {
      const name = pgIdent(schema)
      const byDefault = schema === 'public' && old
      return {
        severity: 'warning' as const,
        object: `schema ${name}`,
        title: `Every role may create objects in schema ${name}`,
        detail:
          `PUBLIC holds CREATE on schema ${name} of this database${byDefault ? ' (the default before PostgreSQL 15)' : schema === 'public' ? ' (granted again: from PostgreSQL 15 on only the database owner has it by default)' : ''}. ` +
          `Any role that can connect may create a table, function or operator there, and another role whose search_path reaches ${name} (public is on every default search_path) may then use it in place of the object it meant, with its own rights: ` +
          'the attack of CVE-2018-1058, and the way into SECURITY DEFINER functions without a search_path of their own.',
        recommendation: `Revoke CREATE on ${name} from PUBLIC and grant it to the roles that create objects there (the application's owner role); keep USAGE so that the schema's objects stay readable.`,
        how_to_investigate: [
          `SELECT nspname, pg_get_userbyid(nspowner) AS owner, nspacl FROM pg_namespace WHERE nspname = ${pgString(schema)};`,
          `SELECT c.relname, pg_get_userbyid(c.relowner) AS owner FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = ${pgString(schema)} ORDER BY 2, 1;   -- who created what there`,
        ],
        how_to_fix: [`REVOKE CREATE ON SCHEMA ${name} FROM PUBLIC;`],
        metrics: { schema, default_before_15: byDefault ? 1 : 0 },
        as_of: found.ts,
      }
    })
  },
}
