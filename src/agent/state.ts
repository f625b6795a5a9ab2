// The collectors' memory across cycles (previous samples, watermarks) and how it survives:
// - Each collector run writes into a StagedState; the runner commits it only when the run finished
//   within its deadline, so a late or failed run never moves a baseline past counts it did not send.
// - Each cycle saves the state it moves to next to the buffer (`service_state_<name>.json`, mode 0600),
//   together with the batches that carry its deltas, before sending them, with what identifies the
//   server and the DSN's target. A runner that starts loads it: an agent restart, a config edit or a key
//   rotation goes on from the last baseline instead of a new one, and resends those batches first (the
//   server applies each batch_id once), so an agent killed while sending counts nothing twice.
// - A file that is a link, another user's or writable by others, or that holds negative or endless
//   numbers, is not used.
// Keys starting with `cache:` hold what can be fetched again (statement texts): neither staged nor saved.
import {
  chmodSync,
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
} from 'node:fs'
import { dirname, join } from 'node:path'
import type { IngestBatch } from '../shared/wire.ts'
import type { CollectorState } from './collectors/types.ts'
import { unsafeFileReason } from './own-file.ts'

export const CACHE_PREFIX = 'cache:'

/** A saved state older than this (the buffer's lifetime) starts a new baseline instead. */
export const SAVED_STATE_MAX_AGE_MS = 60 * 60_000

/** Bumped whenever a collector's state changes shape: an older file is then ignored, with a log line. */
export const STATE_FORMAT = 2

/** Writes go to a stage that reaches the committed state only on commit(); reads see the stage first. */
export class StagedState implements CollectorState {
  private readonly staged = new Map<string, unknown>()
  private readonly deleted = new Set<string>()

  constructor(private readonly committed: Map<string, unknown>) {}

  get(key: string): unknown {
    if (this.deleted.has(key)) return undefined
    return this.staged.has(key) ? this.staged.get(key) : this.committed.get(key)
  }

  has(key: string): boolean {
    return this.get(key) !== undefined
  }

  set(key: string, value: unknown): this {
    if (key.startsWith(CACHE_PREFIX)) {
      this.committed.set(key, value)
      return this
    }
    this.deleted.delete(key)
    this.staged.set(key, value)
    return this
  }

  delete(key: string): boolean {
    if (key.startsWith(CACHE_PREFIX)) return this.committed.delete(key)
    const had = this.has(key)
    this.staged.delete(key)
    this.deleted.add(key)
    return had
  }

  /** True when the run wrote anything to keep. */
  get changed(): boolean {
    return this.staged.size > 0 || this.deleted.size > 0
  }

  commit(): void {
    this.applyTo(this.committed)
  }

  /** Applies the run's writes to `target` (a copy of the committed state, to save before committing). */
  applyTo(target: Map<string, unknown>): void {
    for (const key of this.deleted) target.delete(key)
    for (const [key, value] of this.staged) target.set(key, value)
  }
}

export function stateFileName(databaseName: string): string {
  return `service_state_${databaseName.replace(/[^A-Za-z0-9._-]/g, '_')}.json`
}

/** What a saved state belongs to. */
export interface StateOwner {
  /** Engine, host, port, database and user of the DSN (never its password). */
  target: string
  /** What survives a restart of the same server (PostgreSQL's system identifier); null when unknown. */
  lineage: string | null
}

interface SavedState extends StateOwner {
  format: number
  /** When the cycle that measured `entries` ran (the runner passes its baseline's time, not the write's). */
  saved_at: number
  entries: [string, unknown][]
  /**
   * The batches of the cycle that moved the baselines to `entries`, saved with them before any was sent:
   * an agent killed while sending them resends them at start, and the server applies each batch_id once.
   */
  pending?: unknown[]
}

// Maps (per-statement and per-table samples) travel as tagged arrays of entries. Both walks skip
// arrays of plain values (a statement's counters), so 50,000 statements take tens of milliseconds;
// JSON.stringify's replacer and JSON.parse's reviver, called for every value, took several times that.
const MAP_TAG = '$map'

function isPlain(value: unknown): boolean {
  return value === null || typeof value !== 'object'
}

function toSaved(value: unknown): unknown {
  if (isPlain(value)) return value
  if (value instanceof Map) return { [MAP_TAG]: [...value].map(([k, v]) => [k, toSaved(v)]) }
  if (Array.isArray(value)) return value.every(isPlain) ? value : value.map(toSaved)
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) out[k] = toSaved(v)
  return out
}

function fromSaved(value: unknown): unknown {
  if (isPlain(value)) return value
  if (Array.isArray(value)) return value.every(isPlain) ? value : value.map(fromSaved)
  const record = value as Record<string, unknown>
  const entries = record[MAP_TAG]
  if (Array.isArray(entries) && Object.keys(record).length === 1) {
    return new Map((entries as [unknown, unknown][]).map(([k, v]) => [k, fromSaved(v)]))
  }
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(record)) out[k] = fromSaved(v)
  return out
}

/** A saved state larger than this is not read (50,000 statements take about 5 MB). */
const MAX_STATE_BYTES = 256 * 1024 * 1024

/** True when every number in `value` is finite and not negative. */
function countsOnly(value: unknown): boolean {
  if (typeof value === 'number') return Number.isFinite(value) && value >= 0
  if (value === null || typeof value !== 'object') return true
  if (Array.isArray(value)) return value.every(countsOnly)
  return Object.values(value).every(countsOnly)
}

export type LoadedState =
  | { kind: 'none' }
  | { kind: 'loaded'; owner: StateOwner; savedAt: number; entries: Map<string, unknown>; pending: IngestBatch[] }
  | { kind: 'unusable'; reason: string }

/** The saved state in `path`, if any; a file from another format or that does not parse is unusable. */
export function loadState(path: string): LoadedState {
  if (!existsSync(path)) return { kind: 'none' }
  const unsafe = unsafeFileReason(path)
  if (unsafe) return { kind: 'unusable', reason: unsafe }
  try {
    if (statSync(path).size > MAX_STATE_BYTES)
      return { kind: 'unusable', reason: `larger than ${MAX_STATE_BYTES} bytes` }
    const saved = JSON.parse(readFileSync(path, 'utf8')) as SavedState
    if (saved?.format !== STATE_FORMAT)
      return { kind: 'unusable', reason: `saved by another agent version (format ${saved?.format})` }
    const wellFormed =
      typeof saved.target === 'string' &&
      (saved.lineage === null || typeof saved.lineage === 'string') &&
      typeof saved.saved_at === 'number' &&
      Array.isArray(saved.entries) &&
      saved.entries.every((entry) => Array.isArray(entry) && entry.length === 2 && typeof entry[0] === 'string') &&
      (saved.pending === undefined ||
        (Array.isArray(saved.pending) &&
          saved.pending.every((b) => typeof (b as Partial<IngestBatch> | null)?.batch_id === 'string')))
    if (!wellFormed) return { kind: 'unusable', reason: 'not a state file' }
    // Every sample, watermark and time the collectors keep is a count or a time: a negative or endless
    // number can only come from a damaged or planted file, and would turn into an absurd delta.
    if (!countsOnly(saved.entries)) return { kind: 'unusable', reason: 'it holds numbers no counter can have' }
    return {
      kind: 'loaded',
      owner: { target: saved.target, lineage: saved.lineage },
      savedAt: saved.saved_at,
      entries: new Map(saved.entries.map(([key, value]) => [key, fromSaved(value)])),
      pending: (saved.pending ?? []) as IngestBatch[],
    }
  } catch (e) {
    return { kind: 'unusable', reason: (e as Error).message }
  }
}

/**
 * Saves the committed state (without cache entries) atomically: a crash leaves the old file or the new
 * one. `pending` are the JSON bodies of the batches saved with it, as the shipper sends them (built once).
 */
export function saveState(
  path: string,
  owner: StateOwner,
  state: Map<string, unknown>,
  now: number,
  pending: string[] = [],
): void {
  const entries = [...state]
    .filter(([key]) => !key.startsWith(CACHE_PREFIX))
    .map(([key, value]): [string, unknown] => [key, toSaved(value)])
  const head = JSON.stringify({ format: STATE_FORMAT, saved_at: now, ...owner, entries } satisfies SavedState)
  // The file is written piece by piece: the head, then each batch body as the shipper sends it. Joined
  // into one string first, the bodies (1.5 MB a cycle with 2,000 statements and 1,000 tables) were
  // copied twice more at the agent's peak of memory (bench/RESULTS.md, Agent).
  const pieces = pending.length > 0 ? [head.slice(0, -1), ',"pending":[', ...withCommas(pending), ']}'] : [head]
  mkdirSync(dirname(path), { recursive: true })
  const temporary = join(dirname(path), `.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`)
  try {
    // The samples hold statement ids and table names: the file is the agent user's alone.
    // 'wx' creates the file or fails: never writes through a link planted at the temporary name.
    const fd = openSync(temporary, 'wx', 0o600)
    try {
      for (const piece of pieces) {
        const bytes = Buffer.from(piece)
        for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at)
      }
    } finally {
      closeSync(fd)
    }
    chmodSync(temporary, 0o600)
    renameSync(temporary, path)
  } catch (e) {
    // The write's own error is the one to report, not a failed cleanup (a read-only file system).
    try {
      rmSync(temporary, { force: true })
    } catch {}
    throw e
  }
}

/** The bodies with a comma before each but the first. */
function* withCommas(bodies: string[]): Generator<string> {
  for (const [i, body] of bodies.entries()) {
    if (i > 0) yield ','
    yield body
  }
}

export function removeState(path: string): void {
  rmSync(path, { force: true })
}
