// Where the agent posts its batches (src/shared/wire.ts describes them).
export const INGEST_PATH = '/api/v1/ingest'
