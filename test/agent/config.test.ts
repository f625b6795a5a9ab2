// The agent config parser: every bad-config fixture gives its exact one-line message, defaults are
// filled in, Go durations parse as Go parses them, engines come from DSN schemes, ClickHouse DSNs map to
// HTTP(S) targets, the config file is found in flag → SERVICE_CONFIG → ./config.yaml order, and no
// message ever shows a DSN password or the API key.
import { afterAll, describe, expect, test } from 'bun:test'
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  ConfigError,
  clickhouseTarget,
  detectEngine,
  findConfigPath,
  loadAgentConfig,
  parseAgentConfig,
  parseGoDuration,
  serverPollIntervalMs,
} from '../../src/agent/config.ts'

const KEY = 'dbm_ak_0123456789abcdef_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ'
const FIXTURES = join(import.meta.dir, '..', 'fixtures', 'agent-config')

function errorOf(run: () => unknown): ConfigError {
  try {
    run()
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError)
    return error as ConfigError
  }
  throw new Error('expected a ConfigError, got none')
}

const tmpRoot = mkdtempSync(join(tmpdir(), 'dbm-agent-config-'))
afterAll(() => rmSync(tmpRoot, { recursive: true, force: true }))

describe('bad-config fixtures', () => {
  const files = readdirSync(FIXTURES)
    .filter((file) => file.endsWith('.yaml'))
    .sort()

  test('there are fixtures, each starting with an `# expect:` line', () => {
    expect(files.length).toBeGreaterThanOrEqual(40)
    for (const file of files) expect(readFileSync(join(FIXTURES, file), 'utf8')).toMatch(/^# expect: \S/)
  })

  for (const file of files) {
    test(file, () => {
      const text = readFileSync(join(FIXTURES, file), 'utf8')
      const expected = (text.split('\n', 1)[0] ?? '').slice('# expect: '.length)
      const error = errorOf(() => parseAgentConfig(text))
      expect(error.message).toBe(expected)
      expect(error.message).not.toContain('\n')
      expect(error.message).not.toContain('s3cret')
      expect(error.message).not.toContain(KEY)
    })
  }
})

describe('defaults and accepted values', () => {
  test('a minimal config gets every default', () => {
    const config = parseAgentConfig(`
api:
  key: ${KEY}
databases:
  - dsn: postgres://monitor:pw@db1:5432/app?sslmode=disable
  - dsn: clickhouse://monitor:pw@ch1:9000/default
`)
    expect(config).toEqual({
      api: { endpoint: 'http://localhost:8080', key: KEY },
      health: {},
      databases: [
        {
          name: 'db-0',
          engine: 'postgres',
          dsn: 'postgres://monitor:pw@db1:5432/app?sslmode=disable',
          pollIntervalMs: 10_000,
          objectStatsIntervalMs: 60_000,
          tags: {},
        },
        {
          name: 'db-1',
          engine: 'clickhouse',
          dsn: 'clickhouse://monitor:pw@ch1:9000/default',
          pollIntervalMs: 10_000,
          objectStatsIntervalMs: 60_000,
          tags: {},
        },
      ],
      buffer: { maxBytes: 256_000_000 },
    })
    expect('enabledCollectors' in config.databases[0]!).toBe(false)
    expect('pgLogDir' in config.databases[0]!).toBe(false)
  })

  test('every field set', () => {
    const config = parseAgentConfig(`
api:
  endpoint: https://dbm.example.com/
  key: ${KEY}
health:
  listen_addr: 127.0.0.1:9100
databases:
  - name: orders
    engine: postgres
    dsn: postgresql://monitor:pw@db1/orders
    poll_interval: 1m30s
    enabled_collectors: [query_stats, locks, query_stats]
    pg_log_dir: /var/log/postgresql
    explain_trusted_roles: [app_owner, "Mixed Case", app_owner]
    tags: {env: prod, tier: 1, replica: false, ratio: 1.50}
  - name: events
    engine: clickhouse
    dsn: https://ch.example.com:8443
    poll_interval: 1s
    enabled_collectors: [parts, merges]
`)
    expect(config.api).toEqual({ endpoint: 'https://dbm.example.com', key: KEY })
    expect(config.health).toEqual({ listenAddr: '127.0.0.1:9100', hostname: '127.0.0.1', port: 9100 })
    expect(config.databases).toEqual([
      {
        name: 'orders',
        engine: 'postgres',
        dsn: 'postgresql://monitor:pw@db1/orders',
        pollIntervalMs: 90_000,
        objectStatsIntervalMs: 60_000,
        enabledCollectors: ['query_stats', 'locks'],
        pgLogDir: '/var/log/postgresql',
        explainTrustedRoles: ['app_owner', 'Mixed Case'],
        tags: { env: 'prod', tier: '1', replica: 'false', ratio: '1.50' },
      },
      {
        name: 'events',
        engine: 'clickhouse',
        dsn: 'https://ch.example.com:8443',
        pollIntervalMs: 1000,
        objectStatsIntervalMs: 60_000,
        enabledCollectors: ['parts', 'merges'],
        tags: {},
      },
    ])
  })

  test('explain_trusted_roles: a list of role names, PostgreSQL only', () => {
    const parse =
      (extra: string, dsn = 'postgres://db/app') =>
      () =>
        parseAgentConfig(`api: {key: ${KEY}}\ndatabases: [{dsn: "${dsn}", ${extra}}]`)
    expect(errorOf(parse('explain_trusted_roles: app')).message).toBe(
      'databases[0].explain_trusted_roles: expected a list of role names',
    )
    expect(errorOf(parse('explain_trusted_roles: [""]')).message).toBe(
      'databases[0].explain_trusted_roles: expected a list of role names',
    )
    expect(errorOf(parse(`explain_trusted_roles: [${'r'.repeat(64)}]`)).message).toBe(
      'databases[0].explain_trusted_roles: expected a list of role names',
    )
    expect(errorOf(parse('explain_trusted_roles: [app]', 'clickhouse://ch/default')).message).toBe(
      'databases[0].explain_trusted_roles: only for postgres databases',
    )
    expect(parse('explain_trusted_roles: ["a\'b"]')().databases[0]!.explainTrustedRoles).toEqual(["a'b"])
  })

  test('backup_command: an argv list, the tool named or inferred from the program, interval and timeout defaults', () => {
    const parse = (extra: string) =>
      parseAgentConfig(`api: {key: ${KEY}}\ndatabases: [{dsn: "postgres://db/app", ${extra}}]`).databases[0]!.backup
    expect(parse('backup_command: [/usr/bin/pgbackrest, --stanza=main, info, --output=json]')).toEqual({
      command: ['/usr/bin/pgbackrest', '--stanza=main', 'info', '--output=json'],
      tool: 'pgbackrest',
      intervalMs: 600_000,
      timeoutMs: 60_000,
    })
    expect(
      parse('backup_command: [wal-g, backup-list, --json, --detail], backup_check_interval: 1h, backup_timeout: 2m'),
    ).toMatchObject({ tool: 'walg', intervalMs: 3_600_000, timeoutMs: 120_000 })
    expect(
      parse('backup_command: [sudo, -u, postgres, pgbackrest, info, --output=json], backup_tool: pgbackrest')?.tool,
    ).toBe('pgbackrest')
    expect(parse('poll_interval: 10s')).toBeUndefined()
    expect(errorOf(() => parse('backup_command: [pgbackrest], backup_tool: barman')).message).toBe(
      'databases[0].backup_tool: expected pgbackrest or walg, got "barman"',
    )
  })

  test('object_stats_interval: a duration, 0 or from the poll interval to 1h; 60s when absent; PostgreSQL only', () => {
    const parse = (extra: string, dsn = 'postgres://db/app') =>
      parseAgentConfig(`api: {key: ${KEY}}\ndatabases: [{dsn: "${dsn}", ${extra}}]`).databases[0]!.objectStatsIntervalMs
    expect(parse('poll_interval: 10s')).toBe(60_000)
    expect(parse('object_stats_interval: 5m')).toBe(300_000)
    expect(parse('object_stats_interval: 0')).toBe(0)
    expect(parse('poll_interval: 30s, object_stats_interval: 30s')).toBe(30_000)
    // The default under a longer poll interval: every cycle, not an error.
    expect(parse('poll_interval: 5m')).toBe(60_000)
    expect(errorOf(() => parse('object_stats_interval: 5s')).message).toBe(
      "databases[0].object_stats_interval: must be 0 (every cycle) or at least the database's poll_interval (10s), got 5s",
    )
    expect(errorOf(() => parse('object_stats_interval: 2h')).message).toBe(
      'databases[0].object_stats_interval: must be at most 1h, got 2h',
    )
    expect(errorOf(() => parse('object_stats_interval: 1 minute')).message).toBe(
      'databases[0].object_stats_interval: time: unknown unit " minute" in duration "1 minute"',
    )
    expect(errorOf(() => parse('object_stats_interval: 1m', 'clickhouse://ch:9000/default')).message).toBe(
      'databases[0].object_stats_interval: only for postgres databases',
    )
  })

  test('a PostgreSQL DSN with an IPv6 address literal is a config error naming the way out (postgres.js cannot connect to one)', () => {
    const error = errorOf(() =>
      parseAgentConfig(`api: {key: ${KEY}}\ndatabases: [{name: v6, dsn: "postgres://u:secret@[::1]:5432/app"}]`),
    )
    expect(error.message).toBe(
      'databases[0].dsn: IPv6 address literals are not supported in PostgreSQL DSNs; use a host name that resolves to [::1]',
    )
  })

  test('health.listen_addr forms', () => {
    const health = (addr: string) =>
      parseAgentConfig(`api: {key: ${KEY}}\nhealth: {listen_addr: "${addr}"}\ndatabases: [{dsn: "postgres://db/app"}]`)
        .health
    expect(health(':8081')).toEqual({ listenAddr: ':8081', hostname: '0.0.0.0', port: 8081 })
    expect(health('localhost:8081')).toEqual({ listenAddr: 'localhost:8081', hostname: 'localhost', port: 8081 })
    expect(health('[::1]:8081')).toEqual({ listenAddr: '[::1]:8081', hostname: '::1', port: 8081 })
    expect(health('')).toEqual({})
    for (const bad of ['8081', 'localhost', ':0', ':', 'a:b:8081', ':http']) {
      expect(errorOf(() => health(bad)).message).toBe(`health.listen_addr: expected host:port or :port, got "${bad}"`)
    }
  })

  test('buffer.max_bytes: bytes, SI units (powers of 1000) and IEC units (powers of 1024)', () => {
    const maxBytes = (value: string) =>
      parseAgentConfig(`api: {key: ${KEY}}\nbuffer: {max_bytes: ${value}}\ndatabases: [{dsn: "postgres://db/app"}]`)
        .buffer.maxBytes
    expect(maxBytes('268435456')).toBe(268_435_456)
    expect(maxBytes('1000000B')).toBe(1_000_000)
    expect(maxBytes('1500KB')).toBe(1_500_000)
    expect(maxBytes('256MB')).toBe(256_000_000)
    expect(maxBytes('2GB')).toBe(2_000_000_000)
    expect(maxBytes('1024KiB')).toBe(1_048_576)
    expect(maxBytes('256MiB')).toBe(268_435_456)
    expect(maxBytes('1GiB')).toBe(1_073_741_824)
    // Units in any case: what people type.
    expect(maxBytes('256mb')).toBe(256_000_000)
    expect(maxBytes('1gib')).toBe(1_073_741_824)
    expect(maxBytes('""')).toBe(256_000_000)
    const unitError = (text: string) =>
      `buffer.max_bytes: expected a whole number of bytes, optionally with a unit (B, KB, MB, GB, KiB, MiB, GiB) such as 256MB or 1GiB, got "${text}"`
    for (const bad of ['256M', '1 GiB', '1.5GB', '-1MB', '1e9', '1_000_000', 'MB', '1TB', '99999999999999999GiB']) {
      expect(errorOf(() => maxBytes(JSON.stringify(bad))).message).toBe(unitError(bad))
    }
    expect(errorOf(() => maxBytes('999999')).message).toBe('buffer.max_bytes: must be at least 1MB, got "999999"')
    expect(errorOf(() => maxBytes('0')).message).toBe('buffer.max_bytes: must be at least 1MB, got "0"')
  })

  test('empty and null values mean unset (as a Helm template renders a missing value)', () => {
    const config = parseAgentConfig(`
api:
  endpoint: ""
  key: ${KEY}
health:
  listen_addr:
databases:
  - name: ""
    engine: ~
    dsn: postgres://db/app
    poll_interval: ""
    enabled_collectors:
    pg_log_dir: ""
    tags:
`)
    expect(config.api.endpoint).toBe('http://localhost:8080')
    expect(config.health).toEqual({})
    expect(config.databases[0]).toEqual({
      name: 'db-0',
      engine: 'postgres',
      dsn: 'postgres://db/app',
      pollIntervalMs: 10_000,
      objectStatsIntervalMs: 60_000,
      tags: {},
    })
  })

  test('an empty file asks for the API key first; a YAML anchor can be reused', () => {
    expect(errorOf(() => parseAgentConfig('')).message).toBe('api.key is required')
    const config = parseAgentConfig(`
api: {key: ${KEY}}
databases:
  - {name: a, dsn: "postgres://db/a", tags: &common {team: core}}
  - {name: b, dsn: "postgres://db/b", tags: *common}
`)
    expect(config.databases.map((db) => db.tags)).toEqual([{ team: 'core' }, { team: 'core' }])
  })

  test('a 200-character name is accepted; names are case-sensitive', () => {
    const long = 'n'.repeat(200)
    const config = parseAgentConfig(
      `api: {key: ${KEY}}\ndatabases: [{name: ${long}, dsn: "postgres://a/x"}, {name: Orders, dsn: "postgres://b/x"}, {name: orders, dsn: "postgres://c/x"}]`,
    )
    expect(config.databases.map((db) => db.name)).toEqual([long, 'Orders', 'orders'])
  })

  test('the duplicate check reports the later entry, before later entries are looked at', () => {
    const error = errorOf(() =>
      parseAgentConfig(
        `api: {key: ${KEY}}\ndatabases: [{name: a, dsn: "postgres://a/x"}, {name: a, dsn: "postgres://b/x"}, {dsn: "nope"}]`,
      ),
    )
    expect(error.message).toBe('databases[1].name: duplicate name "a"')
  })

  test('a YAML syntax error names the source, line and column', () => {
    const error = errorOf(() => parseAgentConfig(`api:\n  key: ${KEY}\n  key: again\n`, '/etc/dbm/agent.yaml'))
    expect(error.message).toBe('/etc/dbm/agent.yaml: line 3, column 3: Map keys must be unique')
  })
})

describe('parseGoDuration', () => {
  const valid: [string, number][] = [
    ['0', 0],
    ['-0', 0],
    ['+0', 0],
    ['5s', 5000],
    ['10s', 10_000],
    ['30s', 30_000],
    ['1m', 60_000],
    ['1m30s', 90_000],
    ['2h45m', 9_900_000],
    ['1.5h', 5_400_000],
    ['300ms', 300],
    ['-1.5h', -5_400_000],
    ['+10s', 10_000],
    ['.5s', 500],
    ['5.s', 5000],
    ['1.0s', 1000],
    ['1h1m1s1ms', 3_661_001],
    ['1000000ns', 1],
    ['1500us', 1.5],
    ['1500µs', 1.5],
    ['1500μs', 1.5],
    ['0s', 0],
    ['1s1s', 2000],
    ['2562047h', 9_223_369_200_000],
  ]
  test.each(valid)('%p is %p ms', (text, ms) => {
    expect(parseGoDuration(text)).toBe(ms)
  })

  const invalid: [string, string][] = [
    ['', 'time: invalid duration ""'],
    ['fast', 'time: invalid duration "fast"'],
    ['-', 'time: invalid duration "-"'],
    ['.s', 'time: invalid duration ".s"'],
    ['s', 'time: invalid duration "s"'],
    ['1h-5m', 'time: unknown unit "h-" in duration "1h-5m"'],
    ['--1s', 'time: invalid duration "--1s"'],
    [' 10s', 'time: invalid duration " 10s"'],
    ['2562048h', 'time: invalid duration "2562048h"'],
    ['9223372036854775808ns', 'time: invalid duration "9223372036854775808ns"'],
    ['10', 'time: missing unit in duration "10"'],
    ['1.5', 'time: missing unit in duration "1.5"'],
    ['1s2', 'time: missing unit in duration "1s2"'],
    ['1.5.5h', 'time: missing unit in duration "1.5.5h"'],
    ['10sec', 'time: unknown unit "sec" in duration "10sec"'],
    ['1d', 'time: unknown unit "d" in duration "1d"'],
    ['10S', 'time: unknown unit "S" in duration "10S"'],
    ['10 s', 'time: unknown unit " s" in duration "10 s"'],
    ['1e3s', 'time: unknown unit "e" in duration "1e3s"'],
    ['10秒', 'time: unknown unit "\\xe7\\xa7\\x92" in duration "10\\xe7\\xa7\\x92"'],
    ['5"s', 'time: unknown unit "\\"s" in duration "5\\"s"'],
  ]
  test.each(invalid)('%p fails with Go’s message', (text, message) => {
    expect(errorOf(() => parseGoDuration(text)).message).toBe(message)
  })

  test('the extremes of Go’s int64 nanoseconds', () => {
    expect(parseGoDuration('9223372036854775807ns')).toBe(9_223_372_036_854.775)
    expect(parseGoDuration('-9223372036854775808ns')).toBe(-9_223_372_036_854.775)
  })
})

describe('detectEngine', () => {
  const cases: [string, string | undefined][] = [
    ['postgres://u:p@db:5432/app?sslmode=require', 'postgres'],
    ['postgresql://db/app', 'postgres'],
    ['POSTGRES://db/app', 'postgres'],
    ['clickhouse://u:p@ch:9000/default', 'clickhouse'],
    ['tcp://ch:9000?username=u', 'clickhouse'],
    ['http://ch:8123', 'clickhouse'],
    ['https://ch.example.com:8443', 'clickhouse'],
    ['mysql://root@db/app', undefined],
    ['host=db user=monitor', undefined],
    ['db:5432', undefined],
    ['', undefined],
    ['postgres:db', undefined],
  ]
  test.each(cases)('%p → %p', (dsn, engine) => {
    expect(detectEngine(dsn)).toBe(engine as ReturnType<typeof detectEngine>)
  })
})

describe('clickhouseTarget', () => {
  const cases: [string, string, string, string, string][] = [
    // dsn, url, username, password, database
    ['clickhouse://ch1:9000', 'http://ch1:8123', 'default', '', 'default'],
    ['clickhouse://monitor:pw@ch1:9000/metrics', 'http://ch1:8123', 'monitor', 'pw', 'metrics'],
    ['clickhouse://monitor:pw@ch1:9440/metrics?secure=true', 'https://ch1:8443', 'monitor', 'pw', 'metrics'],
    ['clickhouse://ch1:9440', 'https://ch1:8443', 'default', '', 'default'],
    ['clickhouse://ch1', 'http://ch1:8123', 'default', '', 'default'],
    ['clickhouse://ch1?secure=true', 'https://ch1:8443', 'default', '', 'default'],
    ['clickhouse://ch1?secure', 'https://ch1:8443', 'default', '', 'default'],
    ['clickhouse://ch1?secure=false', 'http://ch1:8123', 'default', '', 'default'],
    ['clickhouse://ch1:8124/db', 'http://ch1:8124', 'default', '', 'db'],
    ['clickhouse://ch1:8124?secure=1', 'https://ch1:8124', 'default', '', 'default'],
    [
      'tcp://127.0.0.1:9000?username=monitor&password=pw&database=metrics',
      'http://127.0.0.1:8123',
      'monitor',
      'pw',
      'metrics',
    ],
    ['tcp://monitor@ch1:9000', 'http://ch1:8123', 'monitor', '', 'default'],
    ['tcp://[::1]:9000/db', 'http://[::1]:8123', 'default', '', 'db'],
    ['clickhouse://mon%40itor:p%40ss%3Aw%2Fd@ch1:9000/my%20db', 'http://ch1:8123', 'mon@itor', 'p@ss:w/d', 'my db'],
    ['CLICKHOUSE://ch1:9000', 'http://ch1:8123', 'default', '', 'default'],
    ['http://ch1:8123', 'http://ch1:8123', 'default', '', 'default'],
    ['http://ch1', 'http://ch1', 'default', '', 'default'],
    ['https://monitor:pw@ch.example.com:8443/metrics', 'https://ch.example.com:8443', 'monitor', 'pw', 'metrics'],
    [
      'https://ch.example.com?database=metrics&username=monitor&password=pw',
      'https://ch.example.com',
      'monitor',
      'pw',
      'metrics',
    ],
    ['http://ch1:9000', 'http://ch1:9000', 'default', '', 'default'],
    ['https://ch1:443/db?secure=true', 'https://ch1', 'default', '', 'db'],
    ['http://ch1/db?secure=false', 'http://ch1', 'default', '', 'db'],
  ]
  test.each(cases)('%p → %p', (dsn, url, username, password, database) => {
    expect(clickhouseTarget(dsn)).toEqual({ url, username, password, database })
  })

  const bad: [string, string][] = [
    ['postgres://db/app', 'expected a clickhouse://, tcp://, http:// or https:// URL'],
    ['ch1:9000', 'expected a clickhouse://, tcp://, http:// or https:// URL'],
    [
      'clickhouse://u:secretpw@ch1:9000,ch2:9000/db',
      'expected one host: the agent watches a single ClickHouse instance, not a cluster',
    ],
    ['clickhouse://u:secretpw@ch1:99999/db', 'not a valid clickhouse:// URL'],
    ['clickhouse://u:secretpw@ch1?secure=yes', 'secure: expected true or false'],
    ['https://u:secretpw@ch1/a/b', 'expected at most one path segment (the database)'],
    ['http://', 'not a valid http:// URL'],
    // Every parameter is one the agent reads, given once, and `secure` agrees with an http(s) scheme.
    [
      'https://ch1:443/db?secure=false',
      'secure=false contradicts the https:// scheme, which decides; leave secure out',
    ],
    ['http://ch1/db?secure=1', 'secure=1 contradicts the http:// scheme, which decides; leave secure out'],
    ['clickhouse://ch1?secure=true&secure=false', 'parameter "secure" is given twice'],
    ['clickhouse://u:secretpw@ch1?database=a&database=b', 'parameter "database" is given twice'],
    [
      'clickhouse://u:secretpw@ch1?skip_verify=true',
      'unknown parameter "skip_verify" (the agent reads username, password, database, secure)',
    ],
    [
      'clickhouse://ch1?dial_timeout=10s',
      'unknown parameter "dial_timeout" (the agent reads username, password, database, secure)',
    ],
    [
      'clickhouse://ch1?compress=lz4',
      'unknown parameter "compress" (the agent reads username, password, database, secure)',
    ],
    [
      'https://ch1?max_execution_time=60',
      'unknown parameter "max_execution_time" (the agent reads username, password, database, secure)',
    ],
    ['tcp://ch1:9000?secure=maybe', 'secure: expected true or false'],
  ]
  test.each(bad)('%p is refused', (dsn, message) => {
    expect(errorOf(() => clickhouseTarget(dsn)).message).toBe(message)
  })
})

describe('findConfigPath and loadAgentConfig', () => {
  let counter = 0
  const freshDir = () => {
    const dir = join(tmpRoot, `cwd-${++counter}`)
    mkdirSync(dir, { recursive: true })
    return dir
  }
  const validYaml = `api: {key: ${KEY}}\ndatabases: [{dsn: "postgres://db/app"}]\n`

  test('--config wins over SERVICE_CONFIG, which wins over ./config.yaml', () => {
    const cwd = freshDir()
    const flagFile = join(cwd, 'flag.yaml')
    const envFile = join(cwd, 'env.yaml')
    for (const file of [flagFile, envFile, join(cwd, 'config.yaml')]) writeFileSync(file, validYaml)
    expect(findConfigPath(flagFile, { SERVICE_CONFIG: envFile }, cwd)).toBe(flagFile)
    expect(findConfigPath(undefined, { SERVICE_CONFIG: envFile }, cwd)).toBe(envFile)
    expect(findConfigPath(undefined, {}, cwd)).toBe(join(cwd, 'config.yaml'))
    expect(findConfigPath('', { SERVICE_CONFIG: '' }, cwd)).toBe(join(cwd, 'config.yaml'))
  })

  test('relative paths are resolved against cwd', () => {
    const cwd = freshDir()
    mkdirSync(join(cwd, 'conf'))
    writeFileSync(join(cwd, 'conf', 'agent.yaml'), validYaml)
    expect(findConfigPath('conf/agent.yaml', {}, cwd)).toBe(join(cwd, 'conf', 'agent.yaml'))
    expect(findConfigPath(undefined, { SERVICE_CONFIG: 'conf/agent.yaml' }, cwd)).toBe(join(cwd, 'conf', 'agent.yaml'))
  })

  test('a chosen file that is missing is an error naming it, with no fallback to ./config.yaml', () => {
    const cwd = freshDir()
    writeFileSync(join(cwd, 'config.yaml'), validYaml)
    const missing = join(cwd, 'missing.yaml')
    expect(errorOf(() => findConfigPath(missing, {}, cwd)).message).toBe(`no config file found: ${missing}`)
    expect(errorOf(() => findConfigPath(undefined, { SERVICE_CONFIG: missing }, cwd)).message).toBe(
      `no config file found: ${missing}`,
    )
    expect(errorOf(() => findConfigPath(undefined, { SERVICE_CONFIG: cwd }, cwd)).message).toBe(
      `no config file found: ${cwd}`,
    )
  })

  test('nothing configured and no ./config.yaml: "no config file found", naming the places looked at', () => {
    const cwd = freshDir()
    expect(errorOf(() => findConfigPath(undefined, {}, cwd)).message).toBe(
      `no config file found (looked at --config, $SERVICE_CONFIG, ${join(cwd, 'config.yaml')})`,
    )
  })

  test('loadAgentConfig reads and parses a file; YAML errors carry its path and line', () => {
    const cwd = freshDir()
    const good = join(cwd, 'good.yaml')
    writeFileSync(good, `\uFEFF${validYaml}`)
    expect(loadAgentConfig(good).databases[0]?.name).toBe('db-0')

    const broken = join(cwd, 'broken.yaml')
    writeFileSync(broken, `api:\n  key: ${KEY}\ndatabases:\n  - dsn: [postgres://db/app\n`)
    expect(errorOf(() => loadAgentConfig(broken)).message).toMatch(
      new RegExp(`^${broken.replaceAll('/', '\\/')}: line \\d+, column \\d+: \\S`),
    )

    const invalid = join(cwd, 'invalid.yaml')
    writeFileSync(invalid, `api: {key: ${KEY}}\n`)
    expect(errorOf(() => loadAgentConfig(invalid)).message).toBe('at least one database entry is required')

    const missing = join(cwd, 'missing.yaml')
    expect(errorOf(() => loadAgentConfig(missing)).message).toBe(`no config file found: ${missing}`)
  })

  // root reads a mode-000 file anyway, so this only means something for other users.
  test.skipIf(process.getuid?.() === 0)('an unreadable file is a one-line error', () => {
    const file = join(freshDir(), 'locked.yaml')
    writeFileSync(file, validYaml)
    chmodSync(file, 0o000)
    expect(errorOf(() => loadAgentConfig(file)).message).toBe(`cannot read config file ${file}: permission denied`)
  })
})

describe('secrets never appear in messages', () => {
  const PASSWORD = 'Sup3rS3cretPw'
  const BAD_KEY_SECRET = 'NotQuiteAnApiKeySecretButPrivate'
  const badConfigs: string[] = [
    // A valid key next to every kind of database problem.
    ...[
      `mysql://root:${PASSWORD}@db:3306/app`,
      `mysql://root:${encodeURIComponent(`${PASSWORD}@/x`)}@db/app`,
      `redis://:${PASSWORD}@cache:6379`,
      `host=db user=monitor password=${PASSWORD} dbname=app`,
      `host=db password='${PASSWORD} x' dbname=app`,
      `sqlserver://db?user=sa&password=${PASSWORD}`,
      `db:5432?pwd=${PASSWORD}`,
      `monitor:${PASSWORD}@db:5432/app`,
    ].map((dsn) => `api: {key: ${KEY}}\ndatabases: [{dsn: "${dsn}"}]`),
    `api: {key: ${KEY}}\ndatabases: [{engine: clickhouse, dsn: "postgres://monitor:${PASSWORD}@db/app"}]`,
    `api: {key: ${KEY}}\ndatabases: [{engine: postgres, dsn: "https://monitor:${PASSWORD}@ch/app"}]`,
    `api: {key: ${KEY}}\ndatabases: [{engine: postgres, dsn: "host=db password=${PASSWORD}"}]`,
    `api: {key: ${KEY}}\ndatabases: [{engine: oracle, dsn: "postgres://monitor:${PASSWORD}@db/app"}]`,
    `api: {key: ${KEY}}\ndatabases: [{dsn: "postgres://monitor:${PASSWORD}@db:99999/app"}]`,
    `api: {key: ${KEY}}\ndatabases: [{dsn: "clickhouse://monitor:${PASSWORD}@ch1:9000,ch2:9000"}]`,
    `api: {key: ${KEY}}\ndatabases: [{dsn: "clickhouse://monitor:${PASSWORD}@ch1:70000"}]`,
    `api: {key: ${KEY}}\ndatabases: [{dsn: "tcp://ch1:9000?password=${PASSWORD}&secure=nope"}]`,
    `api: {key: ${KEY}}\ndatabases: [{dsn: "postgres://monitor:${PASSWORD}@db/app?sslmode=bogus"}]`,
    `api: {key: ${KEY}}\ndatabases: [{dsn: "postgres://db/app?password=${PASSWORD}&password=${PASSWORD}"}]`,
    `api: {key: ${KEY}}\ndatabases: [{dsn: "postgres://monitor@db/app?password=${PASSWORD}&bogus=1"}]`,
    `api: {key: ${KEY}}\ndatabases: [{dsn: "clickhouse://ch1?password=${PASSWORD}&bogus=1"}]`,
    `api: {key: ${KEY}}\ndatabases: [{dsn: "postgres://monitor:${PASSWORD}@db/app", poll_interval: 5ms}]`,
    `api: {key: ${KEY}}\ndatabases: [{dsn: "postgres://monitor:${PASSWORD}@db/app", bogus: 1}]`,
    `api: {key: ${KEY}}\ndatabases: [{name: a, dsn: "postgres://monitor:${PASSWORD}@db/app"}, {name: a, dsn: "postgres://monitor:${PASSWORD}@db/app"}]`,
    `api: {key: ${KEY}}\ndatabases:\n  - dsn: "postgres://monitor:${PASSWORD}@db/app\n`,
    `api: {key: ${KEY}}\ndatabases:\n  - dsn: [postgres://monitor:${PASSWORD}@db/app\n`,
    `api: {key: ${KEY}}\ndatabases:\n  - dsn: postgres://monitor:${PASSWORD}@db/app\n    dsn: again\n`,
    `api: {key: ${KEY}, endpoint: "ftp://x"}\ndatabases: [{dsn: "postgres://db/app"}]`,
    `api: {key: ${KEY}, extra: 1}\ndatabases: [{dsn: "postgres://db/app"}]`,
    `api: ${KEY}\ndatabases: [{dsn: "postgres://db/app"}]`,
    `api: {key: [${KEY}]}\ndatabases: [{dsn: "postgres://db/app"}]`,
    `api: {key: "${KEY}x"}\ndatabases: [{dsn: "postgres://db/app"}]`,
    `api: {key: "${BAD_KEY_SECRET}"}\ndatabases: [{dsn: "postgres://db/app"}]`,
    `api: {key: "dbm_ak_0123456789abcdef_${BAD_KEY_SECRET}"}\ndatabases: [{dsn: "postgres://db/app"}]`,
    `api: {key: ${KEY}}\napi: {key: ${KEY}}\n`,
    `key: ${KEY}\n`,
  ]
  test.each(badConfigs.map((yaml, index) => [index, yaml]))('bad config #%p', (_index, yaml) => {
    const message = errorOf(() => parseAgentConfig(yaml as string, 'config.yaml')).message
    expect(message).not.toContain(PASSWORD)
    expect(message).not.toContain(encodeURIComponent(PASSWORD))
    expect(message).not.toContain(KEY)
    expect(message).not.toContain(KEY.slice('dbm_ak_0123456789abcdef_'.length))
    expect(message).not.toContain(BAD_KEY_SECRET)
    expect(message).not.toContain('\n')
  })

  test('the DSN shown for an unknown engine keeps everything but the password', () => {
    const message = errorOf(() =>
      parseAgentConfig(`api: {key: ${KEY}}\ndatabases: [{dsn: "mysql://root:${PASSWORD}@db:3306/app?tls=true"}]`),
    ).message
    expect(message).toContain('"mysql://root:***@db:3306/app?tls=true"')
  })
})

describe('the poll interval the server sets', () => {
  test("is held to 1 s to 24 h (an older server stored any number), and one that is no finite number leaves the config's", () => {
    const seconds = [
      1e308,
      86_401,
      86_400,
      10,
      0.2,
      0,
      -5,
      Number.NaN,
      Number.POSITIVE_INFINITY,
      '30' as unknown as number,
    ]
    expect(seconds.map((s) => serverPollIntervalMs(s, 7000))).toEqual([
      86_400_000, 86_400_000, 86_400_000, 10_000, 1000, 1000, 1000, 7000, 7000, 7000,
    ])
  })
})
