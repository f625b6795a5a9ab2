// The monitored server's settings as the Configuration page shows them: each setting's detail (unit,
// source with file and line, defaults, context, type, description, pending restart, changed from the
// default) in `server_settings` (migration 17), one row per database holding the latest map the agent
// sent. The agent sends the map only when it changed, so a batch without it leaves the row alone and a
// batch delivered late (from the agent's buffer) never replaces a newer map. The values themselves are
// event_baselines.settings (events/events.ts), read beside the details. Records and interfaces here;
// reads.ts implements ServerSettingsReads, writes.ts ServerSettingsWrites (ingest).
import type { IngestBatch, SettingDetail } from '../../../shared/wire.ts'
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
