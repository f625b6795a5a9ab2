// The previous release's stores and batches (test/fixtures/upgrade, made by scripts/upgrade-fixtures.ts
// with the real v0.1.0 build), and the previous release's binary when it can be had cheaply: built once
// from the tag into a cache folder (git archive, this checkout's node_modules linked; a few seconds) and
// reused by later runs. Without the tag (a shallow clone) the tests that need the binary say so and skip.
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import type { PostgresServer } from '../support/postgres.ts'
import { repoRoot } from '../support/process.ts'

export const fixtureDir = join(repoRoot, 'test', 'fixtures', 'upgrade')
export const PREVIOUS_TAG = 'v0.1.0'

export interface StoreFixture {
  owner: { email: string; password: string }
  org_id: string
  user_id: string
  database_id: string
  keys: { agent: string; reader: string; revoked: string; revoked_id: string }
  session: {
    refresh_token: string
    access_claims: { sub: string; org: string; sid: string; typ: string; exp: number; iat: number }
  }
  window: { since: string; until: string }
  markers: { text: string; runs: number; query_hash: string; total_calls: number }[]
  answers: Record<string, { status: number; body: unknown }>
}

export const expected = JSON.parse(readFileSync(join(fixtureDir, 'expected.json'), 'utf8')) as {
  release: string
  sqlite: StoreFixture
  postgres: StoreFixture
}

export interface CapturedBatch {
  body: Record<string, any>
  status: number
  answer: unknown
}

export const batchesOf = (file: 'batches-v0.1.0.json' | 'batches-current.json'): CapturedBatch[] =>
  JSON.parse(readFileSync(join(fixtureDir, file), 'utf8')).batches

export const jwtSecretOf = (kind: 'sqlite' | 'postgres') =>
  readFileSync(join(fixtureDir, kind, 'jwt-secret'), 'utf8').trim()

/** A data dir holding v0.1.0's SQLite store and secret, as its serve left them. */
export function sqliteDataDir(dir: string): string {
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, 'dbm.sqlite'), Bun.gunzipSync(new Uint8Array(readFileSync(join(fixtureDir, 'sqlite.db.gz')))))
  writeFileSync(join(dir, 'jwt-secret'), `${jwtSecretOf('sqlite')}\n`, { mode: 0o600 })
  return dir
}

/** A fresh database on `server` holding v0.1.0's PostgreSQL store (its pg_dump); its URL. */
export async function postgresStore(server: PostgresServer): Promise<string> {
  const url = await server.freshDatabase()
  const dump = new TextDecoder().decode(
    Bun.gunzipSync(new Uint8Array(readFileSync(join(fixtureDir, 'postgres.sql.gz')))),
  )
  const sql = postgres(url, { max: 1, onnotice: () => {} })
  try {
    // psql meta-commands (none from pg_dump 15, but \restrict from newer ones) are not SQL.
    await sql
      .unsafe(
        dump
          .split('\n')
          .filter((line) => !line.startsWith('\\'))
          .join('\n'),
      )
      .simple()
  } finally {
    await sql.end()
  }
  return url
}

/**
 * Whether everything `before` holds is in `after` alike: objects may have gained fields, arrays hold as
 * many items, each alike. The differences, as `path: before -> after` lines (none: the same).
 */
export function differences(
  before: unknown,
  after: unknown,
  at = '',
  ignore: (path: string) => boolean = () => false,
): string[] {
  if (ignore(at)) return []
  if (Array.isArray(before)) {
    if (!Array.isArray(after) || after.length !== before.length)
      return [`${at}: ${JSON.stringify(before)?.slice(0, 200)} -> ${JSON.stringify(after)?.slice(0, 200)}`]
    return before.flatMap((item, i) => differences(item, after[i], `${at}[${i}]`, ignore))
  }
  if (typeof before === 'object' && before !== null) {
    if (typeof after !== 'object' || after === null) return [`${at}: object -> ${JSON.stringify(after)}`]
    return Object.entries(before).flatMap(([k, v]) =>
      differences(v, (after as Record<string, unknown>)[k], `${at}.${k}`, ignore),
    )
  }
  return Object.is(before, after) ? [] : [`${at}: ${JSON.stringify(before)} -> ${JSON.stringify(after)}`]
}

let previous: Promise<string | { skip: string }> | undefined

/** The previous release's `dbm` (built once into a cache keyed by the tag's commit), or why not. */
export function previousRelease(): Promise<string | { skip: string }> {
  previous ??= (async () => {
    const rev = Bun.spawnSync(['git', 'rev-parse', `${PREVIOUS_TAG}^{commit}`], {
      cwd: repoRoot,
      stdout: 'pipe',
      stderr: 'pipe',
    })
    if (rev.exitCode !== 0)
      return {
        skip: `no tag ${PREVIOUS_TAG} in this checkout (a shallow clone?): the previous release cannot be built`,
      }
    const commit = rev.stdout.toString().trim()
    const dir = join(tmpdir(), `dbm-release-${PREVIOUS_TAG}-${commit.slice(0, 12)}-${process.getuid?.() ?? 0}`)
    const binary = join(dir, 'dist', 'dbm')
    if (existsSync(binary)) return binary
    rmSync(dir, { recursive: true, force: true })
    mkdirSync(dir, { recursive: true })
    const archive = Bun.spawnSync(['sh', '-c', `git archive ${commit} | tar -x -C "${dir}"`], {
      cwd: repoRoot,
      stderr: 'pipe',
    })
    if (archive.exitCode !== 0) return { skip: `git archive ${PREVIOUS_TAG} failed: ${archive.stderr}` }
    symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'))
    const build = Bun.spawn(['bun', 'scripts/build.ts'], { cwd: dir, stdout: 'pipe', stderr: 'pipe' })
    if ((await build.exited) !== 0)
      throw new Error(`building ${PREVIOUS_TAG} failed:\n${await new Response(build.stderr).text()}`)
    return binary
  })()
  return previous
}

/** sha256 of every row of every table of a SQLite file, table by table: what "changes nothing" compares. */
export function sqliteContent(file: string): string {
  const { Database } = require('bun:sqlite') as typeof import('bun:sqlite')
  const db = new Database(file, { readonly: true })
  try {
    const hash = createHash('sha256')
    const tables = db
      .query<{ name: string }, []>("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
      .all()
    for (const { name } of tables) {
      hash.update(name)
      for (const row of db.query(`SELECT * FROM "${name}"`).all()) hash.update(JSON.stringify(row))
    }
    hash.update(JSON.stringify(db.query('SELECT type, name, sql FROM sqlite_master ORDER BY name').all()))
    return hash.digest('hex')
  } finally {
    db.close()
  }
}
