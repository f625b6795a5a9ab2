// Facts about a monitored database that the agent, the server and the dashboard all state: the poll
// interval's default and range, and how long a name may be. Each is defined here once and imported.

/** The poll interval when neither the agent config (`poll_interval`) nor the server says otherwise. */
export const DEFAULT_POLL_INTERVAL_SECONDS = 10

/** The longest poll interval: a day (longer ones overflowed the agent's timer into a busy loop). */
export const MAX_POLL_INTERVAL_SECONDS = 24 * 60 * 60

/**
 * Most characters of a name: a database's (agent config, batch header, the API) and the API's other
 * names (users, organizations, API keys, alert routes).
 */
export const NAME_MAX_CHARS = 200
