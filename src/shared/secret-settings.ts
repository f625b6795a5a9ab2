// Settings whose values can hold secrets never leave the database host: a connection string
// (primary_conninfo: `password=...`), a shell command (archive_command, restore_command,
// ssl_passphrase_command: `PGPASSWORD=... pg_receivewal`), and any setting named like a password,
// secret, token, credential, key, salt, URL or DSN (extensions' and applications' own settings:
// `myapp.api_key`, `myapp.jwt_secret`, `x.pwd`, `anon.salt`, ClickHouse's `s3_secret_access_key`). The
// agent sends them as HIDDEN, so the events timeline can list every other setting's old and new value
// without turning dbm into a store of the monitored servers' passwords. Their changes are not reported
// (HIDDEN before and after); the settings digest still moves (the agent computes it over the real
// values), so the rest of the map goes out as usual.
//
// A name is read as its words (split at `.`, `_` and `-`): a word (or two adjacent words joined)
// containing a secret's stem (password, pwd, jwt, bearer, apikey, hmac, ...) or a word that is a
// secret on its own (key, cred, salt, url, ...) marks it. PostgreSQL's own settings that match while holding no secret (a method, a
// flag, a file's path) are named in NOT_SECRET; test/server/secret-settings.test.ts states, from every
// tested PostgreSQL major's pg_settings, exactly which of PostgreSQL's own settings are masked.
export const HIDDEN = '(hidden: may hold a secret)'

/** Stems that mark a word wherever they appear in it (`dbpassword`, `apikeys`, `authtoken`, `hmac_key`). */
const SECRET_STEM =
  /password|passwd|passphrase|pwd|secret|token|credential|conninfo|connstr|jwt|bearer|apikey|accesskey|privkey|private|hmac/

/** Words that are a secret's name on their own (`x.key`, `db_creds`, `app.database_url`). */
const SECRET_WORD = new Set(['key', 'cred', 'creds', 'salt', 'url', 'uri', 'dsn'])

/** PostgreSQL's own settings named like secrets but holding none. */
const NOT_SECRET = new Set([
  'password_encryption', // a hashing method's name
  'md5_password_warnings', // a flag (PostgreSQL 18)
  'ssl_passphrase_command_supports_reload', // a flag
  'ssl_key_file', // a path; the key stays in the file
])

/** Whether a setting of this name may hold a secret. */
export function isSecretSetting(name: string): boolean {
  const lower = name.toLowerCase()
  if (NOT_SECRET.has(lower)) return false
  // A shell command (archive_command, COPY-like hooks) may hold a password on its command line.
  if (/_command$/.test(lower) || /connection_?string/.test(lower)) return true
  const words = lower.split(/[._-]+/).filter(Boolean)
  if (words.some((w) => SECRET_STEM.test(w) || SECRET_WORD.has(w))) return true
  // A stem split across two words: `api_keys`, `access_key`, `conn_info`.
  if (words.some((w, i) => i > 0 && SECRET_STEM.test(words[i - 1]! + w))) return true
  // `pass` ends a name as a password's short form (`smtp.pass`); inside one it is a verb (`..._pass_ratio`).
  return words.at(-1) === 'pass'
}

/** The settings with every possibly secret value replaced by HIDDEN. */
export function maskSecretSettings(settings: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(settings)) out[name] = isSecretSetting(name) ? HIDDEN : value
  return out
}
