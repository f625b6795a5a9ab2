// The systemd units of deploy/systemd. Always: their structure (the binary and subcommand they run, the
// dbm user, state directories, config files, restart and stop timeout, every hardening key, and no
// MemoryDenyWriteExecute). Where systemd's tools exist: `systemd-analyze verify` on the units pointed at
// the built binary, and the sysusers/tmpfiles files applied to an empty root. Where strace exists too:
// dist/dbm runs `serve` and `agent` under strace (as nobody when the test runs as root, as the units run
// as dbm) through signup, an agent pushing batches from a real PostgreSQL, a hot reload, an API outage
// (buffering) and SIGTERM, and every system call it made must be in the units' filter, every file it
// wrote in its state directory or /tmp, every socket of the allowed families. There is no systemd as PID
// 1 here to run the units themselves, so this is how "the binary works under them" is shown.
import { afterAll, describe, expect, test } from 'bun:test'
import {
  chmodSync,
  chownSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { builtBinary } from '../support/binary.ts'
import { freePort, sharedPostgres, statementsDatabase } from '../support/postgres.ts'
import { cleanEnv, repoRoot, request, runCommand } from '../support/process.ts'
import { until } from '../support/wait.ts'

const unitDir = join(repoRoot, 'deploy', 'systemd')
const dirs: string[] = []
const tempDir = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  dirs.push(dir)
  return dir
}
afterAll(() => {
  if (!process.env.KEEP_SYSTEMD_TMP) for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

/** A unit file as sections of key=value lines; a key set several times keeps every value in order. */
function parseUnit(text: string): Map<string, Map<string, string[]>> {
  const sections = new Map<string, Map<string, string[]>>()
  let current: Map<string, string[]> | undefined
  for (const [i, raw] of text.split('\n').entries()) {
    const line = raw.trim()
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue
    const section = /^\[([A-Za-z]+)\]$/.exec(line)
    if (section) {
      current = new Map()
      sections.set(section[1]!, current)
      continue
    }
    const pair = /^([A-Za-z]+)=(.*)$/.exec(line)
    if (!pair || !current) throw new Error(`line ${i + 1}: not a key=value line in a section: ${raw}`)
    current.set(pair[1]!, [...(current.get(pair[1]!) ?? []), pair[2]!])
  }
  return sections
}

const readUnit = (name: string) => parseUnit(readFileSync(join(unitDir, name), 'utf8'))
/** The one value of `key` in [Service] (undefined when unset; a test failure when set twice). */
function single(unit: Map<string, Map<string, string[]>>, key: string, section = 'Service'): string | undefined {
  const values = unit.get(section)?.get(key)
  if (values && values.length > 1) throw new Error(`${key} set ${values.length} times`)
  return values?.[0]
}

/** The hardening both units carry, key by key (docs/deployment.md "systemd" explains each in a line). */
const hardening: Record<string, string> = {
  NoNewPrivileges: 'yes',
  CapabilityBoundingSet: '',
  AmbientCapabilities: '',
  ProtectSystem: 'strict',
  ProtectHome: 'yes',
  PrivateTmp: 'yes',
  PrivateDevices: 'yes',
  PrivateMounts: 'yes',
  ProtectKernelTunables: 'yes',
  ProtectKernelModules: 'yes',
  ProtectKernelLogs: 'yes',
  ProtectControlGroups: 'yes',
  ProtectClock: 'yes',
  ProtectHostname: 'yes',
  ProtectProc: 'invisible',
  RestrictAddressFamilies: 'AF_INET AF_INET6 AF_UNIX',
  RestrictNamespaces: 'yes',
  RestrictRealtime: 'yes',
  RestrictSUIDSGID: 'yes',
  RemoveIPC: 'yes',
  LockPersonality: 'yes',
  SystemCallArchitectures: 'native',
  SystemCallErrorNumber: 'EPERM',
  UMask: '0077',
}

const units = [
  {
    file: 'dbm-serve.service',
    command: ['/usr/local/bin/dbm', 'serve'],
    state: 'dbm',
    environment: ['DBM_DATA_DIR=/var/lib/dbm DBM_LISTEN=127.0.0.1:8080'],
    environmentFile: '-/etc/dbm/serve.env',
    // serve gives requests in flight 5 s after SIGTERM (STOP_GRACE_MS in src/server/serve.ts), then
    // waits for mails and closes the store: the stop timeout must leave room for all of it.
    minStopSeconds: 5 + 10,
  },
  {
    file: 'dbm-agent.service',
    command: ['/usr/local/bin/dbm', 'agent', '--config', '/etc/dbm/agent.yaml'],
    state: 'dbm-agent',
    environment: ['DBM_AGENT_BUFFER_DIR=/var/lib/dbm-agent'],
    environmentFile: '-/etc/dbm/agent.env',
    // Databases stop side by side, each within the 1 s cancel grace (docs/agent.md).
    minStopSeconds: 10,
  },
] as const

const seconds = (value: string | undefined) => {
  const match = /^(\d+)(s|min)?$/.exec(value ?? '')
  if (!match) throw new Error(`not a time span: ${value}`)
  return Number(match[1]) * (match[2] === 'min' ? 60 : 1)
}

describe('deploy/systemd units (structure; no tools needed)', () => {
  for (const spec of units) {
    test(`${spec.file}: runs \`${spec.command.slice(1).join(' ')}\` as dbm with its state in /var/lib/${spec.state} (0700) and every hardening key`, () => {
      const unit = readUnit(spec.file)
      expect([...unit.keys()]).toEqual(['Unit', 'Service', 'Install'])
      expect(single(unit, 'ExecStart')!.split(' ')).toEqual([...spec.command])
      expect(single(unit, 'Type')).toBe('exec')
      expect(single(unit, 'User')).toBe('dbm')
      expect(single(unit, 'Group')).toBe('dbm')
      expect(single(unit, 'StateDirectory')).toBe(spec.state)
      expect(single(unit, 'StateDirectoryMode')).toBe('0700')
      expect(single(unit, 'WorkingDirectory')).toBe(`/var/lib/${spec.state}`)
      expect(unit.get('Service')!.get('Environment')).toEqual([...spec.environment])
      expect(single(unit, 'EnvironmentFile')).toBe(spec.environmentFile)
      expect(single(unit, 'Restart')).toBe('on-failure')
      expect(seconds(single(unit, 'TimeoutStopSec'))).toBeGreaterThanOrEqual(spec.minStopSeconds)
      for (const [key, value] of Object.entries(hardening))
        expect({ key, value: single(unit, key) }).toEqual({ key, value })
      expect(unit.get('Service')!.get('SystemCallFilter')).toEqual(['@system-service', '~@privileged'])
      // JavaScriptCore's JIT maps its code memory writable and executable (the strace test below sees it).
      expect(unit.get('Service')!.has('MemoryDenyWriteExecute')).toBe(false)
      expect(single(unit, 'WantedBy', 'Install')).toBe('multi-user.target')
    })
  }

  test('dbm-agent.service reloads with SIGHUP (the agent re-reads its config on it) and starts after dbm-serve', () => {
    const unit = readUnit('dbm-agent.service')
    expect(single(unit, 'ExecReload')).toBe('/bin/kill -HUP $MAINPID')
    expect(single(unit, 'After', 'Unit')).toBe('network-online.target dbm-serve.service')
    // serve has no reload: SIGHUP is not one of its signals.
    expect(readUnit('dbm-serve.service').get('Service')!.has('ExecReload')).toBe(false)
  })

  test('the dbm user comes from sysusers.d, /etc/dbm and its files from tmpfiles.d (agent.yaml root:dbm 0640, the env files root only)', () => {
    const lines = (file: string) =>
      readFileSync(join(unitDir, file), 'utf8')
        .split('\n')
        .filter((l) => l.trim() !== '' && !l.startsWith('#'))
        .map((l) => l.trim().split(/\s+(?=(?:[^"]*"[^"]*")*[^"]*$)/))
    expect(lines('dbm.sysusers.conf')).toEqual([['u', 'dbm', '-', '"dbm monitoring"', '/var/lib/dbm', '-']])
    expect(lines('dbm.tmpfiles.conf')).toEqual([
      ['d', '/etc/dbm', '0750', 'root', 'dbm', '-'],
      ['z', '/etc/dbm/agent.yaml', '0640', 'root', 'dbm', '-'],
      ['z', '/etc/dbm/agent.env', '0600', 'root', 'root', '-'],
      ['z', '/etc/dbm/serve.env', '0600', 'root', 'root', '-'],
    ])
  })
})

const has = (tool: string) => Bun.which(tool) !== null

describe('deploy/systemd with systemd tools', () => {
  test.skipIf(!has('systemd-analyze'))(
    'systemd-analyze verify (needs systemd-analyze): both units pass with ExecStart on the built binary, and fail naming it when it is missing; exposure at most 2.0',
    async () => {
      const binary = await builtBinary()
      const dir = tempDir('dbm-systemd-verify-')
      const names = units.map((u) => u.file)
      for (const name of names)
        writeFileSync(
          join(dir, name),
          readFileSync(join(unitDir, name), 'utf8').replaceAll('/usr/local/bin/dbm', binary),
        )
      const verified = await runCommand(['systemd-analyze', 'verify', ...names], { cwd: dir, timeoutMs: 20_000 })
      expect(verified).toEqual({ exitCode: 0, stdout: '', stderr: '' })
      // As shipped the binary is /usr/local/bin/dbm, absent here: verify does check ExecStart.
      if (!existsSync('/usr/local/bin/dbm')) {
        const missing = await runCommand(['systemd-analyze', 'verify', join(unitDir, 'dbm-serve.service')], {
          timeoutMs: 20_000,
        })
        expect(missing.exitCode).not.toBe(0)
        expect(missing.stderr).toContain('Command /usr/local/bin/dbm is not executable')
      }
      for (const name of names) {
        const security = await runCommand(['systemd-analyze', 'security', '--offline=yes', name], {
          cwd: dir,
          timeoutMs: 20_000,
        })
        const level = /Overall exposure level for \S+: ([\d.]+)/.exec(security.stdout + security.stderr)
        expect({ name, found: level !== null }).toEqual({ name, found: true })
        expect(Number(level![1])).toBeLessThanOrEqual(2.0)
      }
    },
    60_000,
  )

  test.skipIf(!has('systemd-sysusers') || !has('systemd-tmpfiles') || process.getuid?.() !== 0)(
    'systemd-sysusers and systemd-tmpfiles (need both, and root to set owners) create the dbm user with no shell and /etc/dbm root:dbm 0750 in an empty root',
    async () => {
      const root = tempDir('dbm-systemd-root-')
      mkdirSync(join(root, 'etc'))
      mkdirSync(join(root, 'usr/lib/sysusers.d'), { recursive: true })
      mkdirSync(join(root, 'usr/lib/tmpfiles.d'), { recursive: true })
      cpSync(join(unitDir, 'dbm.sysusers.conf'), join(root, 'usr/lib/sysusers.d/dbm.conf'))
      cpSync(join(unitDir, 'dbm.tmpfiles.conf'), join(root, 'usr/lib/tmpfiles.d/dbm.conf'))
      expect((await runCommand(['systemd-sysusers', `--root=${root}`])).exitCode).toBe(0)
      const passwd = readFileSync(join(root, 'etc/passwd'), 'utf8').trim().split(':')
      const group = readFileSync(join(root, 'etc/group'), 'utf8').trim().split(':')
      expect([passwd[0], passwd[4], passwd[5], passwd[6]]).toEqual([
        'dbm',
        'dbm monitoring',
        '/var/lib/dbm',
        '/usr/sbin/nologin',
      ])
      expect(Number(passwd[2])).toBeLessThan(1000) // a system user
      expect([group[0], group[2]]).toEqual(['dbm', passwd[3]])
      // A config file an operator left readable by everyone is put right by tmpfiles (at boot too).
      mkdirSync(join(root, 'etc/dbm'))
      writeFileSync(join(root, 'etc/dbm/agent.yaml'), 'api: {}\n', { mode: 0o644 })
      expect((await runCommand(['systemd-tmpfiles', `--root=${root}`, '--create', 'dbm.conf'])).exitCode).toBe(0)
      const mode = (path: string) => {
        const s = statSync(join(root, path))
        return { mode: (s.mode & 0o7777).toString(8), uid: s.uid, gid: s.gid }
      }
      expect(mode('etc/dbm')).toEqual({ mode: '750', uid: 0, gid: Number(passwd[3]) })
      expect(mode('etc/dbm/agent.yaml')).toEqual({ mode: '640', uid: 0, gid: Number(passwd[3]) })
    },
    30_000,
  )
})

// ---- The binary under strace ----

/** Every system call of a systemd group, its nested groups expanded (`systemd-analyze syscall-filter`). */
async function syscallGroups(): Promise<Map<string, Set<string>>> {
  const listing = await runCommand(['systemd-analyze', 'syscall-filter'], { timeoutMs: 20_000 })
  const members = new Map<string, string[]>()
  let current: string[] | undefined
  for (const line of listing.stdout.split('\n')) {
    if (/^@[\w-]+$/.test(line)) members.set(line, (current = []))
    else if (/^ {4}[@\w]/.test(line)) current?.push(line.trim())
    else if (!line.startsWith('    #')) current = undefined
  }
  const expand = (group: string, seen = new Set<string>()): Set<string> => {
    for (const member of members.get(group) ?? []) {
      if (member.startsWith('@')) expand(member, seen)
      else seen.add(member)
    }
    return seen
  }
  return new Map([...members.keys()].map((g) => [g, expand(g)]))
}

interface Traced {
  /** System call name -> how many times it was made. */
  calls: Map<string, number>
  /** The first line of each kind of call, to show in a failure. */
  firstLine: Map<string, string>
  /** Paths opened for writing, created, removed, renamed or re-moded (absolute). */
  writes: Set<string>
  socketFamilies: Set<string>
  writableExecutableMappings: number
  /** Calls that would create a namespace or change the personality. */
  namespaceOrPersonality: string[]
}

const writingCalls = new Set([
  'mkdir',
  'mkdirat',
  'unlink',
  'unlinkat',
  'rmdir',
  'rename',
  'renameat',
  'renameat2',
  'link',
  'linkat',
  'symlink',
  'symlinkat',
  'chmod',
  'fchmodat',
  'chown',
  'lchown',
  'fchownat',
  'truncate',
  'mknod',
  'mknodat',
  'utimensat',
  'utime',
  'utimes',
])

/** Reads an `strace -f -y -s 0` log. Relative paths are resolved against `cwd` (the test checks there was no chdir). */
function readTrace(text: string, cwd: string): Traced {
  const traced: Traced = {
    calls: new Map(),
    firstLine: new Map(),
    writes: new Set(),
    socketFamilies: new Set(),
    writableExecutableMappings: 0,
    namespaceOrPersonality: [],
  }
  const resolve = (dirfd: string | undefined, path: string) => {
    if (path.startsWith('/')) return path
    // -y shows a dirfd's path, AT_FDCWD's too (AT_FDCWD</var/lib/dbm>); calls without one use the cwd.
    return join((dirfd && /<(.+)>$/.exec(dirfd)?.[1]) || cwd, path)
  }
  for (const line of text.split('\n')) {
    // "1234 name(args..." or "1234 <... name resumed>..."; signals and exits ("--- SIG", "+++") are not calls.
    const call = /^\d+\s+(?:(\w+)\(|<\.\.\. (\w+) resumed>)/.exec(line)
    if (!call) continue
    if (call[2]) continue // counted at its start
    const name = call[1]!
    traced.calls.set(name, (traced.calls.get(name) ?? 0) + 1)
    if (!traced.firstLine.has(name)) traced.firstLine.set(name, line)
    const args = line.slice(line.indexOf('(') + 1)
    if (name === 'open' || name === 'openat' || name === 'openat2' || name === 'creat') {
      const open =
        name === 'open' || name === 'creat'
          ? /^()"([^"]*)",\s*([\w|]+)/.exec(args)
          : /^([^,]+),\s*"([^"]*)",\s*(?:\{flags=)?([\w|]+)/.exec(args)
      if (!open) throw new Error(`cannot read: ${line}`)
      if (name === 'creat' || /O_WRONLY|O_RDWR|O_CREAT|O_TRUNC/.test(open[3]!))
        traced.writes.add(resolve(open[1] || undefined, open[2]!))
    } else if (writingCalls.has(name)) {
      // Every path argument: "path" strings, each after its dirfd for the *at calls.
      for (const m of args.matchAll(/(?:(AT_FDCWD(?:<[^>]*>)?|\d+<[^>]*>),\s*)?"([^"]*)"/g))
        traced.writes.add(resolve(m[1], m[2]!))
    } else if (name === 'socket' || name === 'socketpair') {
      traced.socketFamilies.add(args.split(',')[0]!.trim())
    } else if (
      (name === 'mmap' || name === 'mprotect' || name === 'pkey_mprotect') &&
      /PROT_WRITE/.test(args) &&
      /PROT_EXEC/.test(args)
    ) {
      traced.writableExecutableMappings++
    } else if (
      name === 'unshare' ||
      name === 'setns' ||
      name === 'personality' ||
      ((name === 'clone' || name === 'clone3') && /CLONE_NEW/.test(args))
    ) {
      traced.namespaceOrPersonality.push(line)
    }
  }
  return traced
}

/** Where a process of these units may write: its state directory, its private /tmp, the pseudo devices, its own /proc entries. */
function outsideAllowed(writes: Set<string>, stateDir: string, testRoot: string): string[] {
  return [...writes].filter((path) => {
    if (path === stateDir || path.startsWith(`${stateDir}/`)) return false
    // The test's directories (config, the other unit's state) are under /tmp too: they are not allowed.
    if (path === testRoot || path.startsWith(`${testRoot}/`)) return true
    if (/^\/(tmp|var\/tmp)\//.test(path)) return false
    if (/^\/dev\/(null|zero|full|random|urandom|tty|ptmx|pts\/|shm\/)/.test(path)) return false
    if (/^\/proc\/(self|thread-self|\d+)\//.test(path)) return false
    return true
  })
}

describe('the strace reader (no tools needed)', () => {
  test('counts calls, resolves written paths against their dirfd or the cwd, and flags what the units forbid', () => {
    const trace = readTrace(
      [
        '100 openat(AT_FDCWD</srv/state>, "dbm.sqlite", O_RDWR|O_CREAT|O_CLOEXEC, 0644) = 5</srv/state/dbm.sqlite>',
        '100 openat(AT_FDCWD</srv/state>, "/etc/passwd", O_RDONLY|O_CLOEXEC) = 6</etc/passwd>',
        '101 openat(7</srv/other>, "x.db", O_WRONLY) = -1 ENOENT (No such file or directory)',
        '101 open("/etc/dbm/agent.yaml", O_RDWR|O_TRUNC) = -1 EACCES (Permission denied)',
        '101 rename("rel.tmp", "/srv/state/final.json") = 0',
        '101 futex(0x7f00, FUTEX_WAIT_PRIVATE, 0, NULL <unfinished ...>',
        '100 mount("none", "/mnt", NULL, 0, NULL) = -1 EPERM (Operation not permitted)',
        '101 <... futex resumed>) = 0',
        '100 socket(AF_NETLINK, SOCK_RAW|SOCK_CLOEXEC, NETLINK_ROUTE) = 8<socket:[1]>',
        '100 mmap(NULL, 1073750016, PROT_READ|PROT_WRITE|PROT_EXEC, MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE, -1, 0) = 0x7f0000000000',
        '100 unshare(CLONE_NEWNS) = -1 EPERM (Operation not permitted)',
        '100 --- SIGCHLD {si_signo=SIGCHLD} ---',
        '100 +++ exited with 0 +++',
      ].join('\n'),
      '/srv/state',
    )
    expect(Object.fromEntries(trace.calls)).toEqual({
      openat: 3,
      open: 1,
      rename: 1,
      futex: 1,
      mount: 1,
      socket: 1,
      mmap: 1,
      unshare: 1,
    })
    expect([...trace.writes].sort()).toEqual([
      '/etc/dbm/agent.yaml',
      '/srv/other/x.db',
      '/srv/state/dbm.sqlite',
      '/srv/state/final.json',
      '/srv/state/rel.tmp',
    ])
    expect([...trace.socketFamilies]).toEqual(['AF_NETLINK'])
    expect(trace.writableExecutableMappings).toBe(1)
    expect(trace.namespaceOrPersonality).toEqual(['100 unshare(CLONE_NEWNS) = -1 EPERM (Operation not permitted)'])
    const writes = new Set([
      ...trace.writes,
      '/tmp/bun-x',
      '/dev/null',
      '/proc/self/oom_score_adj',
      '/proc/sys/vm/x',
      '/tmp/t/etc/agent.yaml',
      '/tmp/t/other-state/a',
    ])
    expect(outsideAllowed(writes, '/srv/state', '/tmp/t').sort()).toEqual([
      '/etc/dbm/agent.yaml',
      '/proc/sys/vm/x',
      '/srv/other/x.db',
      '/tmp/t/etc/agent.yaml',
      '/tmp/t/other-state/a',
    ])
  })
})

/** strace present and allowed to trace here (a container may forbid ptrace). */
const canStrace =
  has('strace') && has('systemd-analyze') && Bun.spawnSync(['strace', '-o', '/dev/null', 'true']).exitCode === 0
const asRoot = process.getuid?.() === 0

describe('dist/dbm under strace', () => {
  test.skipIf(!canStrace)(
    'serve and agent (need strace, allowed to trace, and systemd-analyze) make only @system-service calls outside @privileged and write only in their state directory and /tmp, through signup, batches, a hot reload, an outage and SIGTERM',
    async () => {
      const started = Date.now()
      const binary = await builtBinary()
      const allowedGroups = await syscallGroups()
      const privileged = allowedGroups.get('@privileged')!
      const allowed = new Set([...allowedGroups.get('@system-service')!].filter((c) => !privileged.has(c)))
      expect(allowed.size).toBeGreaterThan(300)

      const pg = await sharedPostgres(17)
      const [dsn, dsn2] = await Promise.all([statementsDatabase(pg), statementsDatabase(pg)])

      // The layout of the units, under a test root: state directories 0700 of the service user, the config
      // readable by that user only. As root the services run as nobody, as the units run as dbm.
      const root = tempDir('dbm-systemd-')
      chmodSync(root, 0o755)
      const serveState = join(root, 'var-lib-dbm')
      const agentState = join(root, 'var-lib-dbm-agent')
      const etc = join(root, 'etc-dbm')
      for (const dir of [serveState, agentState, etc]) {
        mkdirSync(dir, { mode: 0o700 })
        if (asRoot) chownSync(dir, 65534, 65534)
      }
      const asUser = asRoot ? ['-u', 'nobody'] : []
      // Nobody may not reach the clone (under /root, say): as root the services run a copy in the test root.
      const program = asRoot ? join(root, 'dbm') : binary
      if (asRoot) {
        cpSync(binary, program)
        chmodSync(program, 0o755)
      }

      const traced: {
        name: string
        trace: string
        cwd: string
        proc: ReturnType<typeof Bun.spawn>
        stderr: () => string
        pid: () => number
      }[] = []
      const run = (name: string, args: string[], env: Record<string, string>, cwd: string) => {
        const trace = join(root, `${name}.strace`)
        const proc = Bun.spawn(['strace', '-f', '-qq', '-s', '0', '-y', '-o', trace, ...asUser, program, ...args], {
          cwd,
          env: cleanEnv(env),
          stdin: 'ignore',
          stdout: 'ignore',
          stderr: 'pipe',
          timeout: 120_000,
          killSignal: 'SIGKILL',
        })
        let log = ''
        void (async () => {
          for await (const chunk of proc.stderr as ReadableStream<Uint8Array>) log += new TextDecoder().decode(chunk)
        })()
        // Signals go to the traced process itself (the trace's first pid), not to strace.
        const pid = () => Number(/^(\d+)\s/.exec(readFileSync(trace, 'utf8'))![1])
        const entry = { name, trace, cwd, proc, stderr: () => log, pid }
        traced.push(entry)
        return entry
      }

      try {
        const port = await freePort()
        const base = `http://127.0.0.1:${port}`
        const serve = run('serve', ['serve'], { DBM_DATA_DIR: serveState, DBM_LISTEN: `127.0.0.1:${port}` }, serveState)
        await until(
          'serve under strace to answer /healthz',
          async () => ((await fetch(`${base}/healthz`).catch(() => undefined))?.status === 200 ? true : undefined),
          {
            timeoutMs: 20_000,
          },
        ).catch((e) => {
          throw new Error(`${e.message}\n${serve.stderr()}`)
        })

        const signup = await request(base, 'POST', '/api/v1/auth/signup', {
          body: { email: 'systemd@example.com', password: 'systemd correct horse', name: 'Systemd', org_name: 'Units' },
        })
        expect(signup.status).toBe(201)
        // Verified (the link from serve's log, as without SMTP), so the organization may watch two databases.
        const token = await until(
          'the verification link in the log',
          async () => /verify\?token=([\w-]+)/.exec(serve.stderr())?.[1],
        )
        expect((await request(base, 'GET', `/api/v1/auth/verify-email?token=${token}`)).status).toBe(200)
        const key = await request(base, 'POST', '/api/v1/api-keys', {
          token: signup.body.access_token,
          body: { name: 'agent' },
        })
        expect(key.status).toBe(201)
        const apiKey: string = key.body.key

        const healthPort = await freePort()
        const config = join(etc, 'agent.yaml')
        const yaml = (databases: [string, string][]) =>
          `api:\n  endpoint: ${base}\n  key: ${apiKey}\nhealth:\n  listen_addr: 127.0.0.1:${healthPort}\ndatabases:\n` +
          databases.map(([name, url]) => `  - name: ${name}\n    dsn: ${url}\n    poll_interval: 1s\n`).join('')
        writeFileSync(config, yaml([['orders', dsn]]), { mode: 0o600 })
        if (asRoot) chownSync(config, 65534, 65534)
        const agent = run('agent', ['agent', '--config', config], { DBM_AGENT_BUFFER_DIR: agentState }, agentState)

        // A few batches: the database's last_seen_at moves three times.
        const batchesOf = async (name: string, count: number) => {
          const seen = new Set<string>()
          await until(
            `${count} batches of ${name}`,
            async () => {
              const list = await request(base, 'GET', '/api/v1/databases', { apiKey })
              const db = Array.isArray(list.body) ? list.body.find((d: { name: string }) => d.name === name) : undefined
              if (db?.last_seen_at) seen.add(db.last_seen_at)
              return seen.size >= count ? true : undefined
            },
            { timeoutMs: 25_000, everyMs: 200 },
          ).catch((e) => {
            throw new Error(`${e.message}\nagent:\n${agent.stderr()}\nserve:\n${serve.stderr()}`)
          })
        }
        await batchesOf('orders', 3)
        const health = await fetch(`http://127.0.0.1:${healthPort}/healthz`)
        expect(health.status).toBe(200)
        // The dashboard's reads, the doctor's diagnosis worker among them.
        const orders = (await request(base, 'GET', '/api/v1/databases', { apiKey })).body.find(
          (d: { name: string }) => d.name === 'orders',
        )
        for (const path of ['overview', 'doctor', 'queries'])
          expect({
            path,
            status: (await request(base, 'GET', `/api/v1/databases/${orders.id}/${path}`, { apiKey })).status,
          }).toEqual({ path, status: 200 })

        // Hot reload: a second database in the file, then SIGHUP as `systemctl reload` sends it.
        writeFileSync(
          config,
          yaml([
            ['orders', dsn],
            ['billing', dsn2],
          ]),
        )
        process.kill(agent.pid(), 'SIGHUP')
        await until(
          'the reload',
          async () => (agent.stderr().includes('config reloaded started=billing') ? true : undefined),
          { timeoutMs: 15_000 },
        )
        await batchesOf('billing', 2)

        // SIGTERM stops serve with exit 0 (strace exits with its tracee's status); the agent then buffers.
        process.kill(serve.pid(), 'SIGTERM')
        expect(await serve.proc.exited).toBe(0)
        await until(
          'a buffered batch',
          async () => (readdirSync(agentState).some((f) => /^service_buffer_.+\.db$/.test(f)) ? true : undefined),
          { timeoutMs: 15_000 },
        )
        process.kill(agent.pid(), 'SIGTERM')
        expect(await agent.proc.exited).toBe(0)
      } finally {
        for (const t of traced) if (t.proc.exitCode === null) t.proc.kill('SIGKILL')
        await Promise.all(traced.map((t) => t.proc.exited))
      }

      for (const t of traced) {
        const trace = readTrace(readFileSync(t.trace, 'utf8'), t.cwd)
        const ownState = t.name === 'serve' ? serveState : agentState
        console.log(
          `${t.name}: ${[...trace.calls.values()].reduce((a, b) => a + b, 0)} calls of ${trace.calls.size} kinds (${[...trace.calls.keys()].sort().join(' ')}); ` +
            `wrote ${[...trace.writes]
              .map((p) => p.replace(ownState, '<state>'))
              .sort()
              .join(
                ' ',
              )}; sockets ${[...trace.socketFamilies].join(' ')}; W+X mappings ${trace.writableExecutableMappings}`,
        )
        expect({
          process: t.name,
          chdir: trace.calls.get('chdir') ?? 0,
          fchdir: trace.calls.get('fchdir') ?? 0,
        }).toEqual({ process: t.name, chdir: 0, fchdir: 0 })
        // strace names a number no system call has as syscall_0x<number>; one such call (syscall_0x590b, the
        // result not kept) was seen once in eleven runs, never again. The kernel answers ENOSYS to a number it
        // does not have (x86_64 stops below 0x200; x32's have bit 30 set, refused by SystemCallArchitectures=)
        // and the filter EPERM, so the units change nothing for it but the error number: logged, not failed.
        const unknown = [...trace.calls.keys()].filter(
          (c) => /^syscall_0x[0-9a-f]+$/.test(c) && Number.parseInt(c.slice(10), 16) >= 0x400,
        )
        if (unknown.length > 0)
          console.log(
            `${t.name}: numbers no system call has: ${unknown.map((c) => trace.firstLine.get(c)).join(' | ')}`,
          )
        expect({
          process: t.name,
          outsideFilter: [...trace.calls.keys()]
            .filter((c) => !allowed.has(c) && !unknown.includes(c))
            .sort()
            .map((c) => trace.firstLine.get(c)),
        }).toEqual({ process: t.name, outsideFilter: [] })
        expect({ process: t.name, writesOutside: outsideAllowed(trace.writes, ownState, root) }).toEqual({
          process: t.name,
          writesOutside: [],
        })
        // It did write its state there (the store, or the buffer and the baselines).
        const names = [...trace.writes]
          .filter((p) => p.startsWith(`${ownState}/`))
          .map((p) => p.slice(ownState.length + 1))
        if (t.name === 'serve')
          expect(names).toEqual(
            expect.arrayContaining(['dbm.sqlite', 'dbm.sqlite-wal', 'dbm.sqlite.lock', 'jwt-secret']),
          )
        else
          expect(
            names.some((n) => /^service_buffer_.+\.db$/.test(n)) &&
              names.some((n) => /^service_state_orders\.json/.test(n)),
          ).toBe(true)
        expect({
          process: t.name,
          families: [...trace.socketFamilies].filter((f) => !['AF_INET', 'AF_INET6', 'AF_UNIX'].includes(f)),
        }).toEqual({ process: t.name, families: [] })
        expect({ process: t.name, namespaceOrPersonality: trace.namespaceOrPersonality }).toEqual({
          process: t.name,
          namespaceOrPersonality: [],
        })
        // Why the units leave MemoryDenyWriteExecute out: the JIT's writable and executable code memory.
        expect(trace.writableExecutableMappings).toBeGreaterThan(0)
      }
      // The state directories stay the service user's alone, and their files are that user's (nobody as root).
      if (asRoot)
        for (const file of [join(serveState, 'dbm.sqlite'), join(agentState, 'service_state_orders.json')])
          expect(statSync(file).uid).toBe(65534)
      for (const dir of [serveState, agentState]) expect((statSync(dir).mode & 0o777).toString(8)).toBe('700')
      console.log(`strace workload: ${Date.now() - started} ms`)
    },
    90_000,
  )
})
