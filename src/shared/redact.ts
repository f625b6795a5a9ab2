// Passwords out of text that is printed: logs of the server and the agent, the agent's /healthz and
// --check lines, error messages. Every URL in the text loses the password of its user info
// (postgres://monitor:secret@db/x -> postgres://monitor:***@db/x; an http(s) URL, the agent's API
// endpoint, loses its whole user info, which may be a token: https://***@dbm.example.com), as does
// user info without a scheme (monitor:secret@db:5432/app), and every password-like parameter its value
// (?password=, sslpassword=, a key=value DSN's password='...').

/** A URL as it appears in text: a scheme, `://`, and everything up to white space or a quote. */
const URL_IN_TEXT = /[A-Za-z][A-Za-z0-9+.-]*:\/\/[^\s"'<>`]*/g
/**
 * User info without a scheme (a DSN missing its `postgres://`): `user:password@host`. The parts are
 * bounded so that a long hostile text (a statement in a log line) costs linear time.
 */
const BARE_USER_INFO = /(^|[\s"'(,=])([^\s"'(,=:/@]{1,256}):(?!\/\/)[^\s"']{0,1024}@(?=[^\s"'@])/g
/** A password-like parameter: in a query string, a key=value DSN or a sentence. */
const PASSWORD_PARAMETER = /((?:^|[?&;\s"'(,])(?:password|passwd|pass|pwd|sslpassword)=)('[^']*'|[^&;\s"',]*)/gi

function redactUserInfo(url: string): string {
  const start = url.indexOf('://') + 3
  const queryAt = url.slice(start).search(/[?#]/)
  const authority = queryAt < 0 ? url.slice(start) : url.slice(start, start + queryAt)
  // The last @ before the query ends the user info (a password may hold an unescaped @).
  const at = authority.lastIndexOf('@')
  if (at < 0) return url
  if (/^https?:/i.test(url)) return `${url.slice(0, start)}***${url.slice(start + at)}`
  const colon = authority.indexOf(':')
  if (colon < 0 || colon > at) return url
  return `${url.slice(0, start + colon + 1)}***${url.slice(start + at)}`
}

/** `text` with the passwords of its URLs and password-like parameters replaced by ***. */
export function redactSecrets(text: string): string {
  let out = text.includes('://') ? text.replace(URL_IN_TEXT, redactUserInfo) : text
  if (out.includes('@')) out = out.replace(BARE_USER_INFO, '$1$2:***@')
  return /pass|pwd/i.test(out) ? out.replace(PASSWORD_PARAMETER, '$1***') : out
}
