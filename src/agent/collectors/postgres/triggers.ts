// triggers: the connected database's triggers switched off (pg_trigger.tgenabled = 'D': ALTER TABLE ...
// DISABLE TRIGGER name, or DISABLE TRIGGER ALL, which also switches off the internal triggers that check
// foreign keys). Triggers that fire on replicas only or always ('R', 'A') are configured, not disabled.
// One indexed catalog scan filtered to the disabled ones, so cheap every cycle; names are the server's
// text and travel as they are (the doctor quotes them).
import { ingestMaxItems } from '../../../shared/ingest-limits.ts'
import type { DisabledTrigger } from '../../../shared/wire.ts'
import type { PostgresContext } from '../types.ts'
import { registerCollector } from '../registry.ts'
import { PREPARED } from '../../own-statements.ts'

// For an internal foreign-key trigger, the constraint it enforces and that constraint's own table (the
// referencing one); the trigger may sit on either side (checks on the referencing table, actions on
// the referenced one).
const SQL = `
  SELECT n.nspname AS schema_name, c.relname AS table_name, t.tgname AS trigger_name, t.tgisinternal AS internal,
         con.conname AS constraint_name, cn.nspname AS constraint_schema, cc.relname AS constraint_table
  FROM pg_trigger t
  JOIN pg_class c ON c.oid = t.tgrelid
  JOIN pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_constraint con ON con.oid = t.tgconstraint AND con.contype = 'f'
  LEFT JOIN pg_class cc ON cc.oid = con.conrelid
  LEFT JOIN pg_namespace cn ON cn.oid = cc.relnamespace
  WHERE t.tgenabled = 'D' AND NOT pg_is_other_temp_schema(n.oid)
  ORDER BY t.tgisinternal DESC, n.nspname, c.relname, t.tgname
  LIMIT ${ingestMaxItems.disabled_triggers}`

export const triggers = registerCollector<PostgresContext>({
  name: 'triggers',
  engine: 'postgres',
  defaultEnabled: true,
  async collect(ctx) {
    const rows = await ctx.sql.unsafe<DisabledTrigger[]>(SQL, [], PREPARED)
    return {
      disabled_triggers: rows.map((r) => ({
        schema_name: r.schema_name,
        table_name: r.table_name,
        trigger_name: r.trigger_name,
        internal: r.internal,
        constraint_name: r.constraint_name ?? null,
        constraint_schema: r.constraint_schema ?? null,
        constraint_table: r.constraint_table ?? null,
      })),
    }
  },
})
