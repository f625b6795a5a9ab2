// A batch's settings details at ingest: the latest map per database, never replaced by a late batch.
import type { ServerSettingsWrites } from './types.ts'

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
