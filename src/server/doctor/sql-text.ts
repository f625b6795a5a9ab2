// The doctor's rules quote monitored text into their commands with the functions of
// src/shared/sql-text.ts; they live there because the dashboard writes the same commands (the Active
// page's copy-the-SQL) and the web bundle imports no server module. Re-exported here for the doctor's
// many importers.
export * from '../../shared/sql-text.ts'
