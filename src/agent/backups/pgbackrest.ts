// pgBackRest's `info --output=json` into BackupEntry rows: an array of stanzas, each with its status
// ({code, message}: 0 ok, 2 no valid backup, others an error such as a missing stanza) and its backups
// (label, type full/diff/incr, timestamp.start/stop in epoch seconds, info.size the database's size,
// info.repository.delta what the backup added to the repository, `error` true when pgBackRest found
// checksum errors in it). A stanza in error is reported in `error` and its backups, if any, kept.
import type { BackupEntry } from '../../shared/wire.ts'
import { type ParsedBackups, bytes, fromEpochSeconds, isObject, newestFirst, parseJson, text } from './parse-common.ts'

const COMMAND = '`pgbackrest info --output=json`'
/** pgBackRest's status code of a stanza without any valid backup: a fact, not a failure of the command. */
const NO_VALID_BACKUP = 2

export function parsePgBackRestInfo(output: string): ParsedBackups {
  const parsed = parseJson(output, 'pgbackrest', COMMAND)
  if ('error' in parsed) return { backups: [], error: parsed.error }
  const stanzas = parsed.value
  if (!Array.isArray(stanzas))
    return {
      backups: [],
      error: `pgbackrest printed JSON that is not a list of stanzas: expected the output of ${COMMAND}`,
    }
  if (stanzas.length === 0)
    return {
      backups: [],
      error: 'pgbackrest lists no stanza: check --stanza and the repository settings (pgbackrest info)',
    }
  const backups: BackupEntry[] = []
  const errors: string[] = []
  for (const stanza of stanzas) {
    if (!isObject(stanza)) {
      errors.push('a stanza that is not an object')
      continue
    }
    const name = text(stanza.name, 200)
    const status = isObject(stanza.status) ? stanza.status : {}
    const code = typeof status.code === 'number' ? status.code : null
    if (code !== null && code !== 0 && code !== NO_VALID_BACKUP) {
      errors.push(`stanza ${name ?? '?'}: ${text(status.message, 200) ?? 'error'} (status ${code})`)
    }
    const list = Array.isArray(stanza.backup) ? stanza.backup : []
    for (const b of list) {
      if (!isObject(b)) continue
      const label = text(b.label, 200)
      if (label === null) continue
      const type = typeof b.type === 'string' && /^[a-z]{1,16}$/.test(b.type) ? b.type : 'full'
      const timestamp = isObject(b.timestamp) ? b.timestamp : {}
      const info = isObject(b.info) ? b.info : {}
      const repository = isObject(info.repository) ? info.repository : {}
      backups.push({
        label,
        type,
        started_at: fromEpochSeconds(timestamp.start),
        finished_at: fromEpochSeconds(timestamp.stop),
        size_bytes: bytes(info.size),
        stored_bytes: bytes(repository.delta) ?? bytes(repository.size),
        stanza: name,
        ok: b.error !== true,
      })
    }
  }
  return { backups: newestFirst(backups), error: errors.length > 0 ? errors.join('; ').slice(0, 1_000) : null }
}
