// Settings that may hold secrets are masked before they leave the agent (and again at the server): by
// their names, checked here against every tested PostgreSQL major's own pg_settings.
import { expect, test } from 'bun:test'
import postgres from 'postgres'
import { HIDDEN, isSecretSetting, maskSecretSettings } from '../../src/shared/secret-settings.ts'
import { postgresMajors, sharedPostgres } from '../support/postgres.ts'

test('names that may hold a secret are hidden; ordinary settings, paths and password_encryption are kept', () => {
  for (const name of [
    'primary_conninfo',
    'ssl_passphrase_command',
    'myapp.api_key',
    'app.password',
    'pgaudit.secret',
    'x.token',
    'vault.private_key',
    's3_secret_access_key',
    'key',
    'auth.key',
    'dblink.credentials',
    'restore_command',
    'archive_command',
    'archive_cleanup_command',
    'recovery_end_command',
    'anon.salt',
    'app.database_url',
    'x.dsn',
    'app.uri',
    'app.connection_string',
    'smtp.pass',
    'APP.PASSWORD',
  ]) {
    expect([name, isSecretSetting(name)]).toEqual([name, true])
  }
  for (const name of [
    'work_mem',
    'password_encryption',
    'search_path',
    'tcp_keepalives_idle',
    'shared_buffers',
    'max_parallel_workers',
    'keep_alive_timeout',
    'enable_partition_pruning',
    'archive_mode',
    'archive_timeout',
    'log_min_duration_statement',
    'auth_delay.milliseconds',
    'max_index_keys',
    'krb_server_keyfile',
    'join_runtime_filter_pass_ratio_threshold_for_disabling',
  ]) {
    expect([name, isSecretSetting(name)]).toEqual([name, false])
  }
  expect(maskSecretSettings({ work_mem: '4MB', primary_conninfo: 'password=x', 'a.api_key': 'k' })).toEqual({
    work_mem: '4MB',
    primary_conninfo: HIDDEN,
    'a.api_key': HIDDEN,
  })
})

test('applications’ own settings named for a pwd, jwt, bearer, api key, auth token, credentials or hmac are hidden', () => {
  const custom = [
    'myapp.jwt_secret',
    'x.pwd',
    'a.bearer_token',
    'b.apikeys',
    'c.auth_token',
    'd.db_credentials',
    'e.hmac_key',
    'f.db_creds',
    'g.cred',
    'h.apikey',
    'i.api_keys',
    'j.private_key',
    'k.dbpassword',
    'l.jwt',
    'm.access_key',
  ]
  expect(custom.filter((name) => !isSecretSetting(name))).toEqual([])
  expect(maskSecretSettings({ 'myapp.jwt_secret': 's3cr3t', 'myapp.jwt_ttl_seconds': '3600' })).toEqual({
    'myapp.jwt_secret': HIDDEN,
    'myapp.jwt_ttl_seconds': HIDDEN,
  })
})

/** PostgreSQL's own settings that are masked, on every major 13 to 18: connection strings and shell commands. */
const MASKED_OWN = [
  'archive_cleanup_command',
  'archive_command',
  'primary_conninfo',
  'recovery_end_command',
  'restore_command',
  'ssl_passphrase_command',
]

/**
 * PostgreSQL's own settings whose names hold a secret's word (auth, key, pass, ...) yet are kept: a
 * method, flags, timeouts, a count, paths and library names.
 */
const KEPT_OWN = [
  'authentication_timeout',
  'krb_server_keyfile',
  'max_index_keys',
  'password_encryption',
  'post_auth_delay',
  'pre_auth_delay',
  'ssl_key_file',
  'ssl_passphrase_command_supports_reload',
]
const KEPT_OWN_18 = ['md5_password_warnings', 'oauth_validator_libraries']
const LOOKS_SECRET = /pass|pwd|key|secret|token|auth|cred|conninfo|jwt|bearer|hmac|salt|(^|_)(url|uri|dsn)($|_)/

for (const major of postgresMajors) {
  test(`PostgreSQL ${major}: of its own settings exactly the connection string and the shell commands are masked`, async () => {
    const server = await sharedPostgres(major)
    const sql = postgres(server.url(), { max: 1, onnotice: () => {} })
    try {
      const names = (await sql<{ name: string }[]>`SELECT name FROM pg_settings ORDER BY name`).map((r) => r.name)
      expect(names.filter(isSecretSetting)).toEqual(MASKED_OWN)
      const kept = names.filter((n) => LOOKS_SECRET.test(n) && !isSecretSetting(n))
      expect(kept).toEqual([...KEPT_OWN, ...(major >= 18 ? KEPT_OWN_18 : [])].sort())
      expect(names).toContain('krb_caseins_users')
      expect(isSecretSetting('krb_caseins_users')).toBe(false)
    } finally {
      await sql.end()
    }
  })
}
