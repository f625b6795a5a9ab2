// The monitored server's settings as the Configuration page shows them: each setting's detail (unit,
// source with file and line, defaults, context, type, description, pending restart, changed from the
// default) in `server_settings` (migration 17), one row per database holding the latest map the agent
// sent. The agent sends the map only when it changed, so a batch without it leaves the row alone and a
// batch delivered late (from the agent's buffer) never replaces a newer map. The values themselves are
// event_baselines.settings (events/events.ts), read here beside the details. Reads apart from the ingest write.
import type { IngestBatch, SettingDetail } from '../../../shared/wire.ts'
import type { SqlDriver } from '../driver.ts'
import type { Writes } from '../ingest/batch.ts'

export interface ServerSettings {
  /** Setting → value as SHOW prints it (secrets masked); null before the agent sent any. */
  values: Record<string, string> | null
  /** Setting → its detail; null before an agent that sends details sent any. */
  details: Record<string, SettingDetail> | null
  /** The collected_at of the batch that carried the details; null without them. */
  details_at: number | null
}

export interface ServerSettingsReads {
  /** The database's latest settings and their details. */
  serverSettings(databaseId: string): Promise<ServerSettings>
}

export interface ServerSettingsWrites {
  /** The write of a batch's settings details (nothing when it carries none). */
  applySettingDetails(writes: Writes, databaseId: string, batch: IngestBatch): void
}

const parsed = <T>(text: unknown): T | null => {
  if (typeof text !== 'string') return null
  try {
    return JSON.parse(text) as T
  } catch {
    return null
  }
}

export const serverSettingsWrites: ServerSettingsWrites = {
  applySettingDetails(writes, databaseId, batch) {
    const details = batch.server_state?.settings_detail
    if (!details) return
    writes.add(
      `INSERT INTO server_settings (database_id, collected_at, details) VALUES ($1, $2, $3)
       ON CONFLICT (database_id) DO UPDATE SET collected_at = excluded.collected_at, details = excluded.details
       WHERE excluded.collected_at >= server_settings.collected_at`,
      [databaseId, batch.collected_at, JSON.stringify(details)],
    )
  },
}

export class SqlServerSettingsReads implements ServerSettingsReads {
  constructor(private readonly driver: SqlDriver) {}

  async serverSettings(databaseId: string): Promise<ServerSettings> {
    const [values, details] = await Promise.all([
      this.driver.get<{ settings: unknown }>('SELECT settings FROM event_baselines WHERE database_id = $1', [databaseId]),
      this.driver.get<{ collected_at: number | string; details: unknown }>('SELECT collected_at, details FROM server_settings WHERE database_id = $1', [databaseId]),
    ])
    return {
      values: parsed<Record<string, string>>(values?.settings),
      details: parsed<Record<string, SettingDetail>>(details?.details),
      details_at: details ? Number(details.collected_at) : null,
    }
  }
}
