// The agent's notes on the dashboard: the overview shows the notes to act on; an info note (write
// statements the read-only agent role may not explain) stays on the statements page it concerns.
import { expect, test } from 'bun:test'
import { type AgentNote, warningNotes } from '../../src/web/pages/db/common.tsx'

test('the overview leaves info notes to the page they concern', () => {
  const warning: AgentNote = {
    collector: 'explain_plans',
    message: '1 of 5 statements not explained: permission denied for table orders (grant pg_read_all_data)',
  }
  const info: AgentNote = {
    collector: 'explain_plans',
    message: '3 write statements (INSERT, UPDATE, DELETE) not explained: ...',
    level: 'info',
  }
  const sequences: AgentNote = { collector: 'tables', message: '2 sequences unreadable (grant pg_read_all_data)' }
  expect(warningNotes([warning, info, sequences])).toEqual([warning, sequences])
  expect(warningNotes([info])).toEqual([])
})
