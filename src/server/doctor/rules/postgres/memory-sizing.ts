// shared_buffers and effective_cache_size advice sized to the server's memory (issue 32, deliverable 5):
// the common starting points are a quarter of the RAM for shared_buffers (PostgreSQL's own docs: "25 % of
// the memory in your system"; more rarely helps, as the OS cache holds the rest) and three quarters for
// effective_cache_size (what the planner may assume shared_buffers and the OS cache hold together). With
// the host's memory known (the `host` collector, when the agent runs on the database host) the values are
// computed and compared with the current ones (a setting already at or above its size is not advised
// again: more memory is not the fix then); without it the commands carry placeholders and say that any
// figure would be a guess, never a constant.
import type { DoctorContext } from '../../context.ts'
import { commentText, pgString } from '../../sql-text.ts'
import { bytes } from '../../types.ts'
import { settingBytes, settings } from './log-evidence.ts'

/** Shares of the host's memory. */
export const SHARED_BUFFERS_SHARE = 0.25
export const EFFECTIVE_CACHE_SHARE = 0.75

const MB = 1024 ** 2
const GB = 1024 ** 3

/** A size as a setting's text, rounded down: whole MB below 8 GB (in GB when whole), whole GB from there; at least 128MB. */
export function roundedSetting(n: number): string {
  if (n >= 8 * GB) return `${Math.floor(n / GB)}GB`
  const mb = Math.max(128, Math.floor(n / MB))
  return mb % 1024 === 0 ? `${mb / 1024}GB` : `${mb}MB`
}

export interface MemoryAdvice {
  /** The host's memory, when the host collector sent it. */
  total_bytes: number | null
  /** The advised values (placeholders when the memory is unknown). */
  shared_buffers: string
  effective_cache_size: string
  /** One sentence for a finding's recommendation. */
  text: string
  /** ALTER SYSTEM commands for the settings below their advised size (all of them, as placeholders, when the memory is unknown). */
  commands: string[]
}

/**
 * The advice for a host of `totalBytes` of memory (null: unknown) whose current settings are `current`
 * (SHOW's text; absent when not collected). Pure: unit-tested.
 */
export function memoryAdvice(
  totalBytes: number | null | undefined,
  current: { shared_buffers?: string; effective_cache_size?: string } = {},
): MemoryAdvice {
  if (!totalBytes || totalBytes <= 0) {
    const now = current.shared_buffers ? ` (now ${current.shared_buffers})` : ''
    return {
      total_bytes: null,
      shared_buffers: '<25 % of the RAM>',
      effective_cache_size: '<75 % of the RAM>',
      text:
        `The server's memory is not known to dbm (the agent reads it only when it runs on the database host), so any size for shared_buffers${now} would be a guess: ` +
        'about 25 % of the memory is the usual starting point, and effective_cache_size about 75 %.',
      commands: [
        "ALTER SYSTEM SET shared_buffers = '<25 % of the RAM>';   -- a guess: the server's memory is not known; put its quarter in; takes effect after a restart",
        "ALTER SYSTEM SET effective_cache_size = '<75 % of the RAM>';   -- a guess: put three quarters of the memory in; SELECT pg_reload_conf() applies it",
      ],
    }
  }
  const sharedBuffers = roundedSetting(totalBytes * SHARED_BUFFERS_SHARE)
  const effectiveCache = roundedSetting(totalBytes * EFFECTIVE_CACHE_SHARE)
  const nowShared = settingBytes(current.shared_buffers, 8192)
  const nowCache = settingBytes(current.effective_cache_size, 8192)
  const commands: string[] = []
  const parts: string[] = []
  const memory = bytes(totalBytes)
  if (nowShared === undefined || nowShared < settingBytes(sharedBuffers, 1)!) {
    commands.push(
      `ALTER SYSTEM SET shared_buffers = ${pgString(sharedBuffers)};   -- ${commentText(`25 % of the host's ${memory}${current.shared_buffers ? `, now ${current.shared_buffers}` : ''}`)}; takes effect after a restart`,
    )
    parts.push(
      `shared_buffers ${sharedBuffers} (25 % of the host's ${memory}${current.shared_buffers ? `; now ${current.shared_buffers}` : ''})`,
    )
  }
  if (nowCache === undefined || nowCache < settingBytes(effectiveCache, 1)!) {
    commands.push(
      `ALTER SYSTEM SET effective_cache_size = ${pgString(effectiveCache)};   -- ${commentText(`75 % of the host's ${memory}${current.effective_cache_size ? `, now ${current.effective_cache_size}` : ''}`)}; SELECT pg_reload_conf() applies it`,
    )
    parts.push(
      `effective_cache_size ${effectiveCache} (75 %${current.effective_cache_size ? `; now ${current.effective_cache_size}` : ''})`,
    )
  }
  const text =
    parts.length > 0
      ? `Sized to the host's ${memory} of memory: ${parts.join(', and ')}.`
      : `shared_buffers (${current.shared_buffers}) and effective_cache_size (${current.effective_cache_size}) are already at or above 25 % and 75 % of the host's ${memory}: more memory for PostgreSQL is not the fix; fewer blocks read is.`
  return {
    total_bytes: totalBytes,
    shared_buffers: sharedBuffers,
    effective_cache_size: effectiveCache,
    text,
    commands,
  }
}

/** The advice for this database: the host's memory from the host collector, the settings from the latest batch that carried them. */
export async function memoryAdviceFor(ctx: DoctorContext): Promise<MemoryAdvice> {
  const [host, current] = await Promise.all([
    ctx.once('host', () => ctx.store.host.latestHost(ctx.db.id)),
    settings(ctx),
  ])
  return memoryAdvice(host?.status.memory?.total_bytes ?? null, {
    ...(current?.shared_buffers ? { shared_buffers: current.shared_buffers } : {}),
    ...(current?.effective_cache_size ? { effective_cache_size: current.effective_cache_size } : {}),
  })
}
