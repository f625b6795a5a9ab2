// Where the agent posts its batches (src/shared/wire.ts describes them).
export const INGEST_PATH = '/api/v1/ingest'
/**
 * Request header of a batch the agent sends from its buffer: how long ago it was collected, in whole
 * seconds. A server that must shed load refuses such backlog before current batches (absent: current).
 */
export const BATCH_AGE_HEADER = 'x-dbm-batch-age'
/** Where the agent long-polls for the actions the dashboard asked of a database, and posts their results (`/{id}`). */
export const AGENT_ACTIONS_PATH = '/api/v1/agent/actions'
