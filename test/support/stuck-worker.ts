// A diagnosis worker for tests (test/api/diagnosis-worker.test.ts): the real one (src/server/doctor/worker.ts)
// with one more rule, which never ends for a database whose name begins with "stuck", as a diagnosis
// stuck in a loop over a window threshold of 1e15 s once did. Started with startDiagnosisWorker's `url`.
import { rules } from '../../src/server/doctor/rules/index.ts'
import '../../src/server/doctor/worker.ts'

rules.push({
  id: 'test_stuck',
  engine: 'any',
  category: 'availability',
  summary: 'Never ends for a database named stuck*',
  collectors: [],
  thresholds: {},
  async check(ctx) {
    // Synchronous, so nothing but ending the thread stops it.
    const stuck = ctx.db.name.startsWith('stuck')
    while (stuck) Bun.nanoseconds()
    return []
  },
})
