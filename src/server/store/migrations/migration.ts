// The shape of one schema migration: its version, the name recorded in schema_migrations, and the
// literal DDL for each store. Each released migration lives in a file of its own in this folder.
export interface Migration {
  version: number
  name: string
  sqlite: string
  postgres: string
}
