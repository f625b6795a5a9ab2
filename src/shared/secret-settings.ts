// Settings whose values can hold secrets never leave the database host: a connection string
// (primary_conninfo: `password=...`), a shell command (archive_command, restore_command,
// ssl_passphrase_command: `PGPASSWORD=... pg_receivewal`), and any setting named like a password,
// secret, token, credential, salt, URL, DSN or key (extensions' and applications' own settings:
// `myapp.api_key`, `anon.salt`, ClickHouse's `s3_secret_access_key`). The agent sends them as HIDDEN, so the events timeline can list
// every other setting's old and new value without turning dbm into a store of the monitored servers'
// passwords. Their changes are not reported (HIDDEN before and after); the settings digest still moves
// (the agent computes it over the real values), so the rest of the map goes out as usual.
export const HIDDEN = '(hidden: may hold a secret)'

const SECRET_NAME =
  /conninfo|connstr|connection_?string|pass(word|phrase|wd)?\b|passphrase|password|secret|token|credential|private|salt|(^|[._])(url|uri|dsn)($|[._])|_command$|(^|[._])(api_?|access_?|auth_?)?key($|[._])|_key$|^key_/i

/** Named like a secret, but holding none (a method's name). */
const NOT_SECRET = new Set(['password_encryption'])

/** Whether a setting of this name may hold a secret. */
export const isSecretSetting = (name: string): boolean => !NOT_SECRET.has(name) && SECRET_NAME.test(name)

/** The settings with every possibly secret value replaced by HIDDEN. */
export function maskSecretSettings(settings: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(settings)) out[name] = isSecretSetting(name) ? HIDDEN : value
  return out
}
