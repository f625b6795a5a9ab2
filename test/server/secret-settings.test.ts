// Settings that may hold secrets are masked before they leave the agent (and again at the server).
import { expect, test } from 'bun:test'
import { HIDDEN, isSecretSetting, maskSecretSettings } from '../../src/shared/secret-settings.ts'

test('names that may hold a secret are hidden; ordinary settings, paths and password_encryption are kept', () => {
  for (const name of ['primary_conninfo', 'ssl_passphrase_command', 'myapp.api_key', 'app.password', 'pgaudit.secret', 'x.token', 'vault.private_key', 's3_secret_access_key', 'key', 'auth.key', 'dblink.credentials', 'restore_command', 'archive_command', 'archive_cleanup_command', 'recovery_end_command', 'anon.salt', 'app.database_url', 'x.dsn', 'app.uri']) {
    expect([name, isSecretSetting(name)]).toEqual([name, true])
  }
  for (const name of ['work_mem', 'password_encryption', 'search_path', 'tcp_keepalives_idle', 'shared_buffers', 'max_parallel_workers', 'keep_alive_timeout', 'enable_partition_pruning', 'archive_mode', 'archive_timeout', 'log_min_duration_statement']) {
    expect([name, isSecretSetting(name)]).toEqual([name, false])
  }
  expect(maskSecretSettings({ work_mem: '4MB', primary_conninfo: 'password=x', 'a.api_key': 'k' })).toEqual({ work_mem: '4MB', primary_conninfo: HIDDEN, 'a.api_key': HIDDEN })
})
