// Reads of the monitored server's settings: the values (event_baselines) with their details.
import type { SettingDetail } from '../../../shared/wire.ts'
import type { SqlDriver } from '../driver.ts'
import type { ServerSettings, ServerSettingsReads } from './types.ts'

const parsed = <T>(text: unknown): T | null => {
  if (typeof text !== 'string') return null
  try {
    return JSON.parse(text) as T
  } catch {
    return null
  }
}

export class SqlServerSettingsReads implements ServerSettingsReads {
  constructor(private readonly driver: SqlDriver) {}

  async serverSettings(databaseId: string): Promise<ServerSettings> {
    const [values, details] = await Promise.all([
      this.driver.get<{ settings: unknown }>('SELECT settings FROM event_baselines WHERE database_id = $1', [
        databaseId,
      ]),
      this.driver.get<{ collected_at: number | string; details: unknown }>(
        'SELECT collected_at, details FROM server_settings WHERE database_id = $1',
        [databaseId],
      ),
    ])
    return {
      values: parsed<Record<string, string>>(values?.settings),
      details: parsed<Record<string, SettingDetail>>(details?.details),
      details_at: details ? Number(details.collected_at) : null,
    }
  }
}
