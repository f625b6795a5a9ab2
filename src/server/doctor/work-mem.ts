// How much memory one execution of a spilling statement needs, and which setting gives it: the one
// sizing used by every rule that advises work_mem (pg_temp_files from pg_stat_statements and from the
// log's temp_file entries). Sized per execution, never from a sum over calls, from the best figure there is:
// 1. a stored plan with actual figures (auto_explain): per node, a Sort's "Sort Space Used" on disk ×2
//    (a sort in memory takes about 1.3× to 3.5× its compact file: measured 56.8 MB in memory for a
//    42.9 MB spill of wide rows, 12.3 MB for 3.5 MB of integers), a Hash's "Peak Memory Usage" ×
//    "Hash Batches" (its whole inner side, one batch at a time), a HashAggregate's memory plus twice its
//    "Disk Usage"; hash nodes may use work_mem × hash_mem_multiplier, so theirs is divided by it. work_mem
//    is per node, so the statement needs the largest node's figure, not their sum;
// 2. else the temp bytes pg_stat_statements counted per call, ×2 (as a sort's file);
// 3. else the log's largest single temp file of the statement, ×2.
// Index builds, CLUSTER, VACUUM and REFRESH MATERIALIZED VIEW ... sort under maintenance_work_mem, which
// is what they are offered; everything else gets work_mem, for that statement alone (SET LOCAL).

const MB = 1024 * 1024
const KB = 1024
/** What a sort in memory takes over its file on disk (see the header). */
const SORT_FACTOR = 2

export type MemorySetting = 'work_mem' | 'maintenance_work_mem'

export interface MemoryAdvice {
  setting: MemorySetting
  /** The memory one execution needs, in bytes (before rounding to the setting's whole MB). */
  needed_bytes: number
  /** The value to set, in whole MB (at least 8, never below what is needed). */
  mb: number
  /** Where the figure comes from, in words, for the finding's text. */
  basis: string
}

/** The statements whose sorts run under maintenance_work_mem rather than work_mem. */
const MAINTENANCE = /^\s*(?:create\s+(?:unique\s+)?index|reindex|cluster|vacuum|refresh\s+materialized\s+view|alter\s+table\b[\s\S]*\badd\s+(?:constraint\s+\S+\s+)?(?:primary\s+key|unique|foreign\s+key))\b/i

/** The setting a statement's sorts run under: maintenance_work_mem for index builds and maintenance, else work_mem. */
export function memorySettingFor(text: string | null | undefined): MemorySetting {
  return text && MAINTENANCE.test(text.replace(/^(?:\s*--[^\n]*\n|\s*\/\*[\s\S]*?\*\/)*/, '')) ? 'maintenance_work_mem' : 'work_mem'
}

interface PlanNode {
  'Node Type'?: string
  Strategy?: string
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
  bytes: number
  /** The node that needs it, e.g. "Sort (42944 kB on disk)". */
  node: string
}

/** One node's (or worker's) need when it spilled, in bytes. */
function nodeNeed(n: PlanNode, type: string, hashMultiplier: number): PlanNeed | undefined {
  if (n['Sort Space Type'] === 'Disk' && typeof n['Sort Space Used'] === 'number') {
    return { bytes: n['Sort Space Used'] * KB * SORT_FACTOR, node: `${type} (${n['Sort Space Used']} kB on disk)` }
  }
  const batches = n['Hash Batches']
  if (typeof batches === 'number' && batches > 1 && typeof n['Peak Memory Usage'] === 'number') {
    return { bytes: (n['Peak Memory Usage'] * KB * batches) / hashMultiplier, node: `${type} (${batches} batches of up to ${n['Peak Memory Usage']} kB)` }
  }
  const disk = n['Disk Usage']
  if (typeof disk === 'number' && disk > 0) {
    const peak = n['Peak Memory Usage'] ?? 0
    return { bytes: (peak * KB + disk * KB * SORT_FACTOR) / hashMultiplier, node: `${type} (${peak} kB in memory, ${disk} kB on disk)` }
  }
  return undefined
}

/**
 * The memory the hungriest spilling node of a plan with actual figures needs (its workers' included),
 * or undefined when no node spilled (or the plan has no actual figures: a sampled generic plan).
 */
export function planMemoryNeed(plan: unknown, hashMultiplier = 1): PlanNeed | undefined {
  const root = (plan as { Plan?: PlanNode } | null)?.Plan
  let best: PlanNeed | undefined
  const visit = (n: PlanNode | undefined, depth: number) => {
    if (!n || typeof n !== 'object' || depth > 200) return
    const type = n.Strategy === 'Hashed' ? 'HashAggregate' : (n['Node Type'] ?? 'node')
    for (const part of [n, ...(Array.isArray(n.Workers) ? n.Workers : [])]) {
      const need = nodeNeed(part, type, type === 'Sort' || type === 'Incremental Sort' ? 1 : hashMultiplier)
      if (need && (!best || need.bytes > best.bytes)) best = need
    }
    if (Array.isArray(n.Plans)) for (const child of n.Plans) visit(child, depth + 1)
  }
  visit(root, 0)
  return best
}

export interface SpillEvidence {
  /** The statement's text (decides work_mem or maintenance_work_mem). */
  text?: string | null
  /** A stored plan of it with actual figures (auto_explain's), the newest first. */
  plans?: readonly unknown[]
  /** Temp bytes pg_stat_statements counted over `calls` calls. */
  tempBytes?: number
  calls?: number
  /** The largest single temp file the log showed for it. */
  largestFile?: number | null
  /** hash_mem_multiplier as the server reports it (1 when unknown: never advise too little). */
  hashMultiplier?: number
}

const mbOf = (bytes: number) => Math.max(8, Math.ceil(bytes / MB))

/** The memory one execution of a spilling statement needs, from the best evidence given; undefined without any. */
export function memoryAdvice(e: SpillEvidence): MemoryAdvice | undefined {
  const setting = memorySettingFor(e.text)
  const multiplier = e.hashMultiplier && e.hashMultiplier >= 1 ? e.hashMultiplier : 1
  for (const plan of e.plans ?? []) {
    const need = planMemoryNeed(plan, setting === 'work_mem' ? multiplier : 1)
    if (need) return { setting, needed_bytes: need.bytes, mb: mbOf(need.bytes), basis: `its plan's ${need.node}` }
  }
  if (e.tempBytes && e.tempBytes > 0 && e.calls && e.calls > 0) {
    const perCall = e.tempBytes / e.calls
    const needed = perCall * SORT_FACTOR
    return { setting, needed_bytes: needed, mb: mbOf(needed), basis: `twice its temp bytes per call (${(perCall / MB).toFixed(1)} MB)` }
  }
  if (e.largestFile && e.largestFile > 0) {
    const needed = e.largestFile * SORT_FACTOR
    return { setting, needed_bytes: needed, mb: mbOf(needed), basis: `twice its largest temp file (${(e.largestFile / MB).toFixed(1)} MB)` }
  }
  return undefined
}

/** The command that gives one execution that memory, for that statement alone (no comment: the caller names the statement). */
export function memoryCommand(a: MemoryAdvice): string {
  // CREATE INDEX CONCURRENTLY and VACUUM refuse a transaction block: a plain SET, reset after.
  return a.setting === 'maintenance_work_mem'
    ? `SET maintenance_work_mem = '${a.mb}MB'; <the statement>; RESET maintenance_work_mem;`
    : `BEGIN; SET LOCAL work_mem = '${a.mb}MB'; <the statement>; COMMIT;`
}

/** Why that much, in words: the basis, and for maintenance statements why not work_mem. */
export function memoryReason(a: MemoryAdvice): string {
  return a.setting === 'maintenance_work_mem'
    ? `${a.basis}; index builds, CLUSTER and VACUUM sort under maintenance_work_mem, not work_mem`
    : `${a.basis}; work_mem is per sort or hash node and per session, so for this statement only, not server-wide`
}
