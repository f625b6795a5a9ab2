// Where the agent posts its batches (src/shared/wire.ts describes them).
export const INGEST_PATH = '/api/v1/ingest'
/**
 * Request header of a batch the agent sends from its buffer: how long ago it was collected, in whole
 * seconds. A server that must shed load refuses such backlog before current batches (absent: current).
 */
export const BATCH_AGE_HEADER = 'x-dbm-batch-age'
/**
 * Request header of every batch: the agent's clock when it sent it (epoch ms). The server measures the
 * agent's clock by it against its own (a server that does not know it ignores it).
 */
export const SENT_AT_HEADER = 'x-dbm-sent-at'
/** Where the agent long-polls for the actions the dashboard asked of a database, and posts their results (`/{id}`). */
export const AGENT_ACTIONS_PATH = '/api/v1/agent/actions'
