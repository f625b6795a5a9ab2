// maskSecretStatements, one test per statement form that can carry a secret, with hostile variants
// (doubled quotes, E'' with \' inside, dollar quotes, comments between tokens, newlines, unicode, very
// long texts, several statements), checked to keep no secret and to parse (libpg-query) where the
// original did; and ordinary statements, which must come back exactly as they were.
import { beforeAll, describe, expect, test } from 'bun:test'
import { loadModule, parseSync } from 'libpg-query'
import { MASKED_WHOLE, maskSecretStatements as mask } from '../../src/agent/secret-statements.ts'

beforeAll(async () => {
  await loadModule()
})

const statements = (sql: string): number => (parseSync(sql) as { stmts?: unknown[] }).stmts?.length ?? 0

/** `sql` masked: no trace of `secret`, parses into as many statements as before, and equals `expected` when given. */
function masks(sql: string, secret: string, expected?: string): string {
  const out = mask(sql)
  expect(out).not.toContain(secret)
  expect(statements(out)).toBe(statements(sql))
  if (expected !== undefined) expect(out).toBe(expected)
  return out
}

describe('role passwords', () => {
  test('CREATE ROLE / ALTER ROLE / CREATE USER / ALTER USER ... PASSWORD', () => {
    masks("CREATE ROLE appuser LOGIN PASSWORD 'hunter2'", 'hunter2', "CREATE ROLE appuser LOGIN PASSWORD '***'")
    masks("ALTER ROLE appuser PASSWORD 'hunter2'", 'hunter2', "ALTER ROLE appuser PASSWORD '***'")
    masks(
      "create user app with encrypted password 'hunter2' valid until 'infinity'",
      'hunter2',
      "create user app with encrypted password '***' valid until 'infinity'",
    )
    masks(
      "ALTER USER app WITH PASSWORD 'SCRAM-SHA-256$4096:abc$def:ghi'",
      'SCRAM',
      "ALTER USER app WITH PASSWORD '***'",
    )
  })
  test("quoting: doubled quotes, E strings with \\', dollar quotes with and without tag, U& strings", () => {
    masks("ALTER ROLE app PASSWORD 'it''s; a */ secret'", 'secret', "ALTER ROLE app PASSWORD '***'")
    masks("ALTER ROLE app PASSWORD E'it\\'s \\\\ secret'", 'secret', "ALTER ROLE app PASSWORD '***'")
    masks("ALTER ROLE app PASSWORD $$it's secret$$", 'secret', 'ALTER ROLE app PASSWORD $$***$$')
    masks('ALTER ROLE app PASSWORD $pw$it$$s secret$pw$', 'secret', 'ALTER ROLE app PASSWORD $pw$***$pw$')
    masks("ALTER ROLE app PASSWORD U&'secret\\0041'", 'secret', "ALTER ROLE app PASSWORD U&'***'")
    // U& keeps its prefix, so that a UESCAPE clause after it still parses
    masks("ALTER ROLE app PASSWORD U&'!0073ecret' UESCAPE '!'", 'ecret', "ALTER ROLE app PASSWORD U&'***' UESCAPE '!'")
    // literals PostgreSQL joins across a line break are one value
    masks("ALTER ROLE app PASSWORD 'sec'\n'ret'", 'ret', "ALTER ROLE app PASSWORD '***'\n'***'")
    masks("SET myapp.password = 'sec'\n  'ret'", 'ret', "SET myapp.password = '***'\n  '***'")
    // a role that happens to be named "mapping" is a role
    masks("CREATE USER mapping PASSWORD 'secret'", 'secret', "CREATE USER mapping PASSWORD '***'")
    masks("ALTER USER mapping WITH PASSWORD 'secret'", 'secret', "ALTER USER mapping WITH PASSWORD '***'")
  })

  test("statements inside DO blocks and function bodies; a function's SET clause", () => {
    masks(
      "DO $$BEGIN ALTER ROLE app PASSWORD 'secret'; END$$",
      'secret',
      "DO $$BEGIN ALTER ROLE app PASSWORD '***'; END$$",
    )
    masks(
      "DO $do$ BEGIN IF true THEN SET myapp.token = 'secret'; END IF; END $do$",
      'secret',
      "DO $do$ BEGIN IF true THEN SET myapp.token = '***'; END IF; END $do$",
    )
    masks(
      "CREATE FUNCTION f() RETURNS int LANGUAGE sql SET myapp.password = 'secret' AS $$ SELECT 1 $$",
      'secret',
      "CREATE FUNCTION f() RETURNS int LANGUAGE sql SET myapp.password = '***' AS $$ SELECT 1 $$",
    )
    masks(
      "CREATE OR REPLACE PROCEDURE p() SET myapp.api_key TO 'secret' LANGUAGE sql AS 'SELECT 1'",
      'secret',
      "CREATE OR REPLACE PROCEDURE p() SET myapp.api_key TO '***' LANGUAGE sql AS 'SELECT 1'",
    )
  })

  test('connection strings: values run to white space, as libpq reads them; hostile literals are masked, not passed through', () => {
    masks(
      "SELECT dblink_connect('host=x password=p@ss,w0rd;x&y)z dbname=d')",
      'w0rd',
      "SELECT dblink_connect('host=x password=*** dbname=d')",
    )
    masks("SELECT dblink_connect(E'password=ab\\\\cd host=x')", 'cd', "SELECT dblink_connect(E'password=*** host=x')")
    // an E-string whose quoted value never closes: 60 escaped backslash pairs made the old pattern give up and pass it through
    const pairs = '\\\\'.repeat(60)
    const hostile = `SELECT dblink_connect(E'password=\\'${pairs} host=x password=hunter2 ')`
    expect(mask(hostile)).not.toContain('hunter2')
    // a long run of "a." (the old URL pattern rescanned it from every word boundary)
    const long = `SELECT '${'a.'.repeat(100_000)}'`
    expect(mask(long)).toBe(long)
  })
  test('mixed case, comments and newlines between tokens, a quoted role name, unicode and bidi', () => {
    masks(
      'AlTeR /* a /* nested */ comment */ RoLe\n"PASSWORD" -- line\n  PaSsWoRd\n\'sécret\u202e ✓\'',
      'sécret',
      'AlTeR /* a /* nested */ comment */ RoLe\n"PASSWORD" -- line\n  PaSsWoRd\n\'***\'',
    )
    masks('CREATE ROLE "weird "" role" PASSWORD \'secret\'', 'secret', 'CREATE ROLE "weird "" role" PASSWORD \'***\'')
  })
  test('several statements: each one masked, the others kept', () => {
    masks(
      "SELECT 1; ALTER ROLE a PASSWORD 's1'; CREATE ROLE b PASSWORD 's2';SELECT 'PASSWORD'",
      's1',
      "SELECT 1; ALTER ROLE a PASSWORD '***'; CREATE ROLE b PASSWORD '***';SELECT 'PASSWORD'",
    )
  })
  test('a very long password and a long text around it', () => {
    const secret = 'x'.repeat(100_000)
    const out = masks(`${'-- pad\n'.repeat(2000)}ALTER ROLE app PASSWORD '${secret}'`, secret)
    expect(out.endsWith("PASSWORD '***'")).toBe(true)
  })
  test('PASSWORD NULL and other role options stay', () => {
    const sql = "ALTER ROLE app PASSWORD NULL VALID UNTIL '2030-01-01'"
    expect(mask(sql)).toBe(sql)
  })
})

describe('settings named like a secret', () => {
  test('ALTER SYSTEM SET, SET, SET LOCAL, SET SESSION, ALTER DATABASE|ROLE ... SET', () => {
    masks("ALTER SYSTEM SET myapp.api_token = 'sk_live_123'", 'sk_live', "ALTER SYSTEM SET myapp.api_token = '***'")
    masks(
      "ALTER SYSTEM SET primary_conninfo TO 'host=a password=pw'",
      'pw',
      "ALTER SYSTEM SET primary_conninfo TO '***'",
    )
    masks("SET myapp.secret = 'sk_live_123'", 'sk_live', "SET myapp.secret = '***'")
    masks('SET LOCAL myapp.token TO sk_live_123, 42', 'sk_live', "SET LOCAL myapp.token TO '***', '***'")
    masks("SET SESSION \"myapp.api_key\" = E'sk_live\\'123'", 'sk_live', 'SET SESSION "myapp.api_key" = \'***\'')
    masks("ALTER DATABASE app SET anon.salt = 'pepper'", 'pepper', "ALTER DATABASE app SET anon.salt = '***'")
    masks(
      'ALTER ROLE app IN DATABASE db SET myapp.password TO $$pw$$',
      'pw',
      'ALTER ROLE app IN DATABASE db SET myapp.password TO $$***$$',
    )
    masks(
      "ALTER FUNCTION f() SET myapp.token = 'sk_live_1' STRICT",
      'sk_live',
      "ALTER FUNCTION f() SET myapp.token = '***' STRICT",
    )
    masks(
      "SELECT set_config('myapp.api_token', 'sk_live_1', false)",
      'sk_live',
      "SELECT set_config('myapp.api_token', '***', false)",
    )
    masks(
      "select SET_CONFIG ( 'myapp.secret' , E'sk_live\\'2' , true ), 1",
      'sk_live',
      "select SET_CONFIG ( 'myapp.secret' , '***' , true ), 1",
    )
  })
  test('ordinary settings, DEFAULT and UPDATE ... SET stay exactly as they are', () => {
    for (const sql of [
      'SET search_path = public, "$user"',
      "ALTER SYSTEM SET work_mem = '64MB'",
      "ALTER SYSTEM SET password_encryption = 'scram-sha-256'",
      'ALTER SYSTEM SET myapp.token TO DEFAULT',
      "UPDATE users SET password = 'x' WHERE id = 1",
      "SET TIME ZONE 'UTC'",
      "SELECT set_config('search_path', 'public', false)",
    ])
      expect(mask(sql)).toBe(sql)
  })
})

describe('OPTIONS of user mappings, servers and foreign tables', () => {
  test('a user mapping: every option value', () => {
    masks(
      "CREATE USER MAPPING FOR app SERVER remote OPTIONS (user 'remote_user', password 'pw''1')",
      "pw''1",
      "CREATE USER MAPPING FOR app SERVER remote OPTIONS (user '***', password '***')",
    )
    masks(
      "ALTER USER MAPPING FOR CURRENT_USER SERVER remote OPTIONS (SET password 'pw2', ADD \"user\" 'u')",
      'pw2',
      "ALTER USER MAPPING FOR CURRENT_USER SERVER remote OPTIONS (SET password '***', ADD \"user\" '***')",
    )
  })
  test('a server: secret-looking option names only', () => {
    masks(
      "CREATE SERVER s FOREIGN DATA WRAPPER w OPTIONS (host 'h', sslpassword 'pw', api_key 'k1')",
      "'pw'",
      "CREATE SERVER s FOREIGN DATA WRAPPER w OPTIONS (host 'h', sslpassword '***', api_key '***')",
    )
    const plain = "ALTER SERVER s OPTIONS (SET host 'h2', DROP port)"
    expect(mask(plain)).toBe(plain)
  })
})

describe('COPY ... PROGRAM and connection strings in literals', () => {
  test('COPY ... PROGRAM: the command is masked (it may hold PGPASSWORD=...)', () => {
    masks("COPY t FROM PROGRAM 'PGPASSWORD=pw psql -c ''x'''", 'pw', "COPY t FROM PROGRAM '***'")
  })
  test('password= and URL passwords inside any string literal', () => {
    masks(
      "SELECT dblink_connect('c', 'host=a password=pw1 dbname=b')",
      'pw1',
      "SELECT dblink_connect('c', 'host=a password=*** dbname=b')",
    )
    masks(
      "SELECT dblink_connect('host=a password = ''p w'' dbname=b')",
      'p w',
      "SELECT dblink_connect('host=a password = *** dbname=b')",
    )
    masks(
      "SELECT dblink('postgresql://u:pw1@h/db', 'select 1')",
      'pw1',
      "SELECT dblink('postgresql://u:***@h/db', 'select 1')",
    )
    masks(
      "CREATE SUBSCRIPTION s CONNECTION E'host=a password=\\'pw1\\'' PUBLICATION p",
      'pw1',
      "CREATE SUBSCRIPTION s CONNECTION E'host=a password=***' PUBLICATION p",
    )
    masks(
      "DO $$BEGIN PERFORM dblink_connect('password=pw1'); END$$",
      'pw1',
      "DO $$BEGIN PERFORM dblink_connect('password=***'); END$$",
    )
  })
})

describe('ordinary statements and texts that cannot be read', () => {
  test('ordinary statements come back exactly as they were', () => {
    for (const sql of [
      "INSERT INTO users (name, password) VALUES ('a', 'not-masked')",
      'SELECT password, token FROM users WHERE id = $1',
      "SELECT 'PASSWORD ''x''' AS password",
      "SELECT $$ALTER ROLE a PASSWORD 'x'$$",
      'CREATE TABLE secrets (password text, api_key text)',
      "SELECT 'naïve \u202e text', \"ünïcode\" FROM t -- password 'x'",
      '',
    ])
      expect(mask(sql)).toBe(sql)
  })
  test('a text cut mid-string is masked whole when it may hold a secret, kept otherwise', () => {
    expect(mask("ALTER ROLE app PASSWORD 'sk_live_cut")).toBe(MASKED_WHOLE)
    expect(mask("SELECT dblink_connect('host=a password=pw")).toBe(MASKED_WHOLE)
    expect(mask('ALTER ROLE app PASSWORD $x$pw')).toBe(MASKED_WHOLE)
    expect(mask("SET myapp.token = 'sk /* ")).toBe(MASKED_WHOLE)
    expect(mask("SELECT 'cut here")).toBe("SELECT 'cut here")
  })
})
