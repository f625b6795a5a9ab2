// The response of GET /api/v1/databases/{id}/configuration (src/server/routes/configuration.ts): every
// setting of the monitored server with its value, unit, source, defaults, context, whether it awaits a
// restart and differs from its default, and the advice dbm has on it (a doctor rule's word, findings).
import { t } from 'elysia'
import { Nullable, Severity, Timestamp } from './common.ts'

export const SettingFinding = t.Object({
  key: t.String({ description: "the finding's key (rule:object), as the doctor answers it" }),
  rule: t.String(),
  severity: Severity,
  title: t.String(),
})

export const ConfigurationSetting = t.Object({
  name: t.String(),
  value: t.String({
    description: 'as SHOW prints it, the unit included (`128MB`, `30s`); masked for a setting that may hold a secret',
  }),
  unit: Nullable(t.String({ description: 'the unit the raw defaults count in (`8kB`, `ms`); null: none' })),
  source: Nullable(
    t.String({
      description:
        'pg_settings.source: default, configuration file, override, command line, database, user...; ClickHouse: profile; null from an agent that sends no details',
    }),
  ),
  source_label: Nullable(
    t.String({
      description:
        'the source in words: `postgresql.conf:12`, `ALTER SYSTEM`, `ALTER DATABASE`, `ALTER ROLE`, `command line`, `default`',
    }),
  ),
  file: Nullable(t.String({ description: 'the configuration file that sets it (needs pg_read_all_settings)' })),
  line: Nullable(t.Integer()),
  default: Nullable(
    t.String({ description: 'the built-in default in the same form as value (boot_val with its unit)' }),
  ),
  reset_value: Nullable(t.String({ description: 'the value a RESET gives (reset_val), in the same form as value' })),
  context: Nullable(
    t.String({
      description: 'pg_settings.context: postmaster, sighup, superuser, user, backend, superuser-backend, internal',
    }),
  ),
  applies: Nullable(
    t.String({
      description: 'what a change needs, in words: restart, reload, superuser, session, new connection, fixed',
    }),
  ),
  type: Nullable(t.String()),
  description: Nullable(t.String()),
  pending_restart: t.Boolean({ description: 'changed in the configuration, applied only after a restart' }),
  changed: t.Boolean({ description: 'differs from the built-in default' }),
  advice: Nullable(
    t.String({ description: "why a change of it matters, from the doctor's table of risky settings; null: none" }),
  ),
  findings: t.Array(SettingFinding, { description: "the doctor's current findings that name this setting" }),
})

export const Configuration = t.Object(
  {
    engine: t.Union([t.Literal('postgres'), t.Literal('clickhouse')]),
    collected_at: Nullable(
      Timestamp('when the agent sent the details; null when it sent none (older agents: values only)'),
    ),
    details: t.Boolean({
      description: "whether the agent sent the settings' details; without them only names and values are known",
    }),
    total: t.Integer({ description: 'settings known' }),
    changed: t.Integer({ description: 'settings that differ from their default' }),
    pending_restart: t.Integer({ description: 'settings awaiting a restart' }),
    findings_unavailable: t.Boolean({ description: 'the doctor was busy: findings are left out this time' }),
    settings: t.Array(ConfigurationSetting, { description: 'by name; filtered by changed and q when given' }),
  },
  { title: 'Configuration' },
)
