// The guarded pg_cancel_backend / pg_terminate_backend commands: src/shared/session-commands.ts, shared
// with the dashboard's Active page (whose bundle imports no server module). Re-exported for the doctor's rules.
export * from '../../shared/session-commands.ts'
