// How much memory one execution of a spilling statement needs, and which setting gives it: the one
// sizing used by every rule that advises work_mem (pg_temp_files from pg_stat_statements and from the
// log's temp_file entries, pg_slow_statements). Sized per execution, never from a sum over calls, and
// per process: work_mem is a limit of each sort or hash node in each process, so a parallel plan's
// leader and workers each have their own. From the best figure there is:
// 1. a stored plan with actual figures (auto_explain): per node and per process (the node's own figure
//    is the leader's, its Workers entries the workers'), a Sort's "Sort Space Used" on disk ×2 (a sort
//    in memory takes about 1.3× to 3.5× its compact file: measured 56.8 MB in memory for a 42.9 MB spill
//    of wide rows, 12.3 MB for 3.5 MB of integers), a Hash's "Peak Memory Usage" × "Hash Batches" (its
//    whole inner side, one batch at a time), a HashAggregate's memory plus twice its "Disk Usage"; hash
//    nodes may use work_mem × hash_mem_multiplier, so theirs is divided by it, and a Parallel Hash's
//    table is shared by the Gather's planned workers and its leader, whose work_mem adds up (PostgreSQL
//    sizes it so), so its figure is divided by them too. work_mem is per node, so the statement needs the
//    largest node's figure, not their sum;
// 2. else the temp bytes pg_stat_statements counted per call, which are every process's together: split
//    over the processes of its plan (a sampled plan's Gather says how many), and over the sort's passes:
//    a sort of D bytes that needs more merge passes than its memory allows rewrites all of it on each
//    pass but the last, so a multi-pass sort writes D × its passes (tuplesort's merge order is
//    memory / 264 kB, 6 to 500 tapes; a run holds its memory's worth of tuples, more than their file, so
//    there are at least D / memory runs). The passes, the fewest those runs need under the setting in
//    effect, so that D is never underestimated; then ×2 as a sort's file. Measured (PostgreSQL 17): a
//    CREATE INDEX under maintenance_work_mem 1MB wrote 127.7 MB in 3 passes of its 42.5 MB tape file;
//    it sorts in memory in 53.2 MB;
// 3. else the log's largest single temp file of the statement (one process's), ×2.
// Index builds, CLUSTER, VACUUM and REFRESH MATERIALIZED VIEW ... sort under maintenance_work_mem, which
// is what they are offered; a parallel index build shares one maintenance_work_mem among its processes,
// so its temp bytes are not split. Everything else gets work_mem, for that statement alone (SET LOCAL).
// The value offered is rounded up to 1/8 of its power of two (88MB, not 85MB), at least 8MB, and never
// below the setting in effect: when that already covers the need there is nothing to raise, and the
// advice says so instead of a command.
import { settingBytes } from './rules/postgres/log-evidence.ts'

const MB = 1024 * 1024
const KB = 1024
/** What a sort in memory takes over its file on disk (see the header). */
const SORT_FACTOR = 2
/** The least value offered, in MB: below it a SET saves nothing worth a thought. */
const MIN_MB = 8

export type MemorySetting = 'work_mem' | 'maintenance_work_mem'

export interface MemoryAdvice {
  setting: MemorySetting
  /** The memory one execution needs in one process, in bytes (before rounding). */
  needed_bytes: number
  /** The value to set, in whole MB: the need rounded up (at least 8), never below the setting in effect. */
  mb: number
  /** The setting in effect as the server reported it, in bytes; undefined when not reported. */
  current_bytes?: number
  /** False when the setting in effect already covers the need: nothing to raise, no command. */
  raise: boolean
  /** The processes that each have their own work_mem (a parallel plan's leader and workers); 1 otherwise. */
  processes: number
  /** Where the figure comes from, in words, for the finding's text. */
  basis: string
}

/** The statements whose sorts run under maintenance_work_mem rather than work_mem. */
const MAINTENANCE =
  /^\s*(?:create\s+(?:unique\s+)?index|reindex|cluster|vacuum|refresh\s+materialized\s+view|alter\s+table\b[\s\S]*\badd\s+(?:constraint\s+\S+\s+)?(?:primary\s+key|unique|foreign\s+key))\b/i

/** The setting a statement's sorts run under: maintenance_work_mem for index builds and maintenance, else work_mem. */
export function memorySettingFor(text: string | null | undefined): MemorySetting {
  return text && MAINTENANCE.test(text.replace(/^(?:\s*--[^\n]*\n|\s*\/\*[\s\S]*?\*\/)*/, ''))
    ? 'maintenance_work_mem'
    : 'work_mem'
}

interface PlanNode {
  'Node Type'?: string
  Strategy?: string
  'Parallel Aware'?: boolean
  'Workers Planned'?: number
  'Workers Launched'?: number
  'Sort Space Used'?: number
  'Sort Space Type'?: string
  'Peak Memory Usage'?: number
  'Hash Batches'?: number
  'Original Hash Batches'?: number
  'Disk Usage'?: number
  'HashAgg Batches'?: number
  Workers?: PlanNode[]
  Plans?: PlanNode[]
}

export interface PlanNeed {
  /** Bytes of work_mem one process needs for the node. */
  bytes: number
  /** The node that needs it, e.g. "Sort (42944 kB on disk)" or "Sort (16608 kB on disk in the busiest of 3 processes)". */
  node: string
  /** Processes with their own work_mem under the Gather above the node (1 outside a parallel plan). */
  processes: number
}

const processesText = (n: number) => `${n} processes (the leader and ${n - 1} worker${n === 2 ? '' : 's'})`

/** One node's (or one worker's) need when it spilled, in bytes. `shared`: the processes a Parallel Hash's table is shared by. */
function nodeNeed(
  n: PlanNode,
  _type: string,
  hashMultiplier: number,
  shared: number,
): { bytes: number; figure: string } | undefined {
  if (n['Sort Space Type'] === 'Disk' && typeof n['Sort Space Used'] === 'number') {
    return { bytes: n['Sort Space Used'] * KB * SORT_FACTOR, figure: `${n['Sort Space Used']} kB on disk` }
  }
  const batches = n['Hash Batches']
  if (typeof batches === 'number' && batches > 1 && typeof n['Peak Memory Usage'] === 'number') {
    return {
      bytes: (n['Peak Memory Usage'] * KB * batches) / hashMultiplier / shared,
      figure: `${batches} batches of up to ${n['Peak Memory Usage']} kB`,
    }
  }
  const disk = n['Disk Usage']
  if (typeof disk === 'number' && disk > 0) {
    const peak = n['Peak Memory Usage'] ?? 0
    return {
      bytes: (peak * KB + disk * KB * SORT_FACTOR) / hashMultiplier,
      figure: `${peak} kB in memory, ${disk} kB on disk`,
    }
  }
  return undefined
}

/** The processes of the Gather or Gather Merge: its planned workers and its leader (a Parallel Hash is sized for them). */
const gatherProcesses = (n: PlanNode) =>
  typeof n['Workers Planned'] === 'number' && n['Workers Planned'] > 0 ? n['Workers Planned'] + 1 : 1

/**
 * The work_mem one process needs for the hungriest spilling node of a plan with actual figures, or
 * undefined when no node spilled (or the plan has no actual figures: a sampled generic plan). Each
 * process is read on its own: the node's figure (the leader's) and each of its Workers entries.
 */
export function planMemoryNeed(plan: unknown, hashMultiplier = 1): PlanNeed | undefined {
  const root = (plan as { Plan?: PlanNode } | null)?.Plan
  let best: PlanNeed | undefined
  const visit = (n: PlanNode | undefined, depth: number, processes: number) => {
    if (!n || typeof n !== 'object' || depth > 200) return
    const type =
      n.Strategy === 'Hashed'
        ? 'HashAggregate'
        : n['Node Type'] === 'Hash' && n['Parallel Aware'] === true
          ? 'Parallel Hash'
          : (n['Node Type'] ?? 'node')
    const workers = Array.isArray(n.Workers) ? n.Workers.filter((w) => w && typeof w === 'object') : []
    const shared = type === 'Parallel Hash' ? processes : 1
    // A Parallel Hash's figure is the shared table's; any other node's is one process's.
    const parts = [n, ...workers].map((part) =>
      nodeNeed(part, type, type === 'Sort' || type === 'Incremental Sort' ? 1 : hashMultiplier, shared),
    )
    const needs = parts.filter((p) => p !== undefined)
    const top = needs.reduce<(typeof needs)[number] | undefined>((a, b) => (!a || b.bytes > a.bytes ? b : a), undefined)
    if (top && (!best || top.bytes > best.bytes)) {
      const node =
        type === 'Parallel Hash' && processes > 1
          ? `${type} (${top.figure}, one table shared by ${processesText(processes)} whose work_mem adds up)`
          : workers.length > 0
            ? `${type} (${top.figure} in the busiest of ${processesText(workers.length + 1)}, each with its own work_mem)`
            : `${type} (${top.figure})`
      best = { bytes: top.bytes, node, processes: type === 'Parallel Hash' ? processes : workers.length + 1 }
    }
    const below = n['Node Type'] === 'Gather' || n['Node Type'] === 'Gather Merge' ? gatherProcesses(n) : processes
    if (Array.isArray(n.Plans)) for (const child of n.Plans) visit(child, depth + 1, below)
  }
  visit(root, 0, 1)
  return best
}

/** The processes a plan runs in: its widest Gather's workers (launched when known, else planned) and its leader. */
export function planProcesses(plan: unknown): number {
  let most = 1
  const visit = (n: PlanNode | undefined, depth: number) => {
    if (!n || typeof n !== 'object' || depth > 200) return
    if (n['Node Type'] === 'Gather' || n['Node Type'] === 'Gather Merge') {
      const workers = typeof n['Workers Launched'] === 'number' ? n['Workers Launched'] : n['Workers Planned']
      if (typeof workers === 'number' && Number.isFinite(workers) && workers > 0)
        most = Math.max(most, Math.min(1024, Math.floor(workers)) + 1)
    }
    if (Array.isArray(n.Plans)) for (const child of n.Plans) visit(child, depth + 1)
  }
  visit((plan as { Plan?: PlanNode } | null)?.Plan, 0)
  return most
}

/** tuplesort's merge order for `memory` bytes: memory / (256 kB of merge buffer + 8 kB per tape), 6 to 500. */
const mergeOrder = (memory: number) => Math.min(500, Math.max(6, Math.floor(memory / (264 * KB))))

/**
 * The bytes a sort spilled once, from all it wrote (`written`) under `memory` bytes of sort memory: the
 * fewest passes a sort of that size needs at that memory (at least bytes / memory runs, merged
 * mergeOrder at a time; every pass but the last rewrites all of it).
 */
export function spilledOnce(written: number, memory: number): { bytes: number; passes: number } {
  if (!(memory > 0)) return { bytes: written, passes: 1 }
  const order = mergeOrder(memory)
  for (let passes = 1; passes < 20; passes++) {
    const bytes = written / passes
    const runs = Math.ceil(bytes / memory)
    const needed = runs <= 1 ? 1 : Math.ceil(Math.log(runs) / Math.log(order) - 1e-9)
    if (needed <= passes) return { bytes, passes }
  }
  return { bytes: written / 20, passes: 20 }
}

export interface SpillEvidence {
  /** The statement's text (decides work_mem or maintenance_work_mem). */
  text?: string | null
  /** Its stored plans, the newest first: those with actual figures (auto_explain's) size it, any says whether it runs in parallel. */
  plans?: readonly unknown[]
  /** Temp bytes pg_stat_statements counted over `calls` calls. */
  tempBytes?: number
  calls?: number
  /** The largest single temp file the log showed for it. */
  largestFile?: number | null
  /** The server's settings as SHOW prints them (work_mem, maintenance_work_mem, hash_mem_multiplier), when reported. */
  settings?: Record<string, string> | null
}

/** A value in whole MB for `bytes`: at least 8, rounded up to an eighth of its power of two (85 → 88, 300 → 320). */
export function roundedMb(bytes: number): number {
  const mb = Math.max(MIN_MB, Math.ceil(bytes / MB))
  const step = 2 ** Math.max(0, Math.floor(Math.log2(mb)) - 3)
  return Math.ceil(mb / step) * step
}

const mbText = (bytes: number) => `${(bytes / MB).toFixed(1)} MB`

/** The memory one execution of a spilling statement needs, from the best evidence given; undefined without any. */
export function memoryAdvice(e: SpillEvidence): MemoryAdvice | undefined {
  const setting = memorySettingFor(e.text)
  const hashSetting = Number(e.settings?.hash_mem_multiplier)
  const multiplier = setting === 'work_mem' && Number.isFinite(hashSetting) && hashSetting >= 1 ? hashSetting : 1
  // SHOW prints work_mem as '4MB' or '1GB'; a bare number is kB.
  const current = settingBytes(e.settings?.[setting], KB)
  const advise = (needed: number, processes: number, basis: string): MemoryAdvice => {
    const raise = current === undefined || needed > current
    const mb = raise ? roundedMb(needed) : Math.ceil(current! / MB)
    return {
      setting,
      needed_bytes: needed,
      mb,
      ...(current === undefined ? {} : { current_bytes: current }),
      raise,
      processes,
      basis,
    }
  }
  for (const plan of e.plans ?? []) {
    const need = planMemoryNeed(plan, multiplier)
    if (need) return advise(need.bytes, need.processes, `its plan's ${need.node}`)
  }
  if (e.tempBytes && e.tempBytes > 0 && e.calls && e.calls > 0) {
    const perCall = e.tempBytes / e.calls
    // A parallel index build shares one maintenance_work_mem among its processes: its bytes are not split.
    const processes = setting === 'work_mem' ? Math.max(1, ...(e.plans ?? []).map(planProcesses)) : 1
    const perProcess = perCall / processes
    const once = current === undefined ? { bytes: perProcess, passes: 1 } : spilledOnce(perProcess, current)
    const needed = once.bytes * SORT_FACTOR
    const split =
      (processes > 1 ? ` over its ${processesText(processes)}, each with its own work_mem` : '') +
      (once.passes > 1
        ? `, written in ${once.passes} merge passes under the ${mbText(current!)} in effect: ${mbText(once.bytes)} spilled once`
        : '')
    return advise(needed, processes, `twice its temp bytes per call (${mbText(perCall)}${split})`)
  }
  if (e.largestFile && e.largestFile > 0) {
    const needed = e.largestFile * SORT_FACTOR
    return advise(needed, 1, `twice its largest temp file (${mbText(e.largestFile)})`)
  }
  return undefined
}

/**
 * The command that gives one execution that memory, for that statement alone (no comment: the caller
 * names the statement and adds memoryReason); with nothing to raise, the SHOW that finds the session or
 * role that runs it with less.
 */
export function memoryCommand(a: MemoryAdvice): string {
  if (!a.raise) return `SHOW ${a.setting};`
  // CREATE INDEX CONCURRENTLY and VACUUM refuse a transaction block: a plain SET, reset after.
  return a.setting === 'maintenance_work_mem'
    ? `SET maintenance_work_mem = '${a.mb}MB'; <the statement>; RESET maintenance_work_mem;`
    : `BEGIN; SET LOCAL work_mem = '${a.mb}MB'; <the statement>; COMMIT;`
}

/** The advice in a few words for a list of statements: "needing about 88 MB of work_mem per execution" and why not when nothing is to raise. */
export function memoryNeedText(a: MemoryAdvice): string {
  const each = a.processes > 1 ? ` in each of its ${a.processes} processes` : ''
  return a.raise
    ? `needing about ${a.mb} MB of ${a.setting} per execution${each}`
    : `needing about ${mbText(a.needed_bytes)} of ${a.setting} per execution${each}, which the ${mbText(a.current_bytes!)} in effect already covers (nothing to raise)`
}

/** Why that much, in words: the basis, and for maintenance statements why not work_mem. */
export function memoryReason(a: MemoryAdvice): string {
  const perProcess = a.processes > 1 ? ` (per process: ${a.processes} processes each take it)` : ''
  if (!a.raise) {
    return `${a.basis}: about ${mbText(a.needed_bytes)} per execution${perProcess}, which the ${a.setting} in effect (${mbText(a.current_bytes!)}) already covers: nothing to raise; run SHOW ${a.setting} in the session or as the role that runs it, which may set it lower`
  }
  return a.setting === 'maintenance_work_mem'
    ? `${a.basis}; index builds, CLUSTER and VACUUM sort under maintenance_work_mem, not work_mem`
    : `${a.basis}${perProcess}; work_mem is per sort or hash node and per process, so for this statement only, not server-wide`
}
