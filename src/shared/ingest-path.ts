// Where the agent posts its batches (src/shared/wire.ts describes them).
export const INGEST_PATH = '/api/v1/ingest'
/** Where the agent long-polls for the actions the dashboard asked of a database, and posts their results (`/{id}`). */
export const AGENT_ACTIONS_PATH = '/api/v1/agent/actions'
