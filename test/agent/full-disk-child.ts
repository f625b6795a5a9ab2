// Child process of shipping-faults.test.ts where tmpfs cannot be mounted: runs the Agent under the
// file-size limit its parent set (`ulimit -f`), so every buffer write fails as on a full disk, drives
// three cycles and prints the /healthz status and the log lines as one JSON line, then exits 0.
// Usage: bun test/agent/full-disk-child.ts <config.yaml> <buffer dir>
import { Agent } from '../../src/agent/agent.ts'
import { createLogger } from '../../src/shared/log.ts'
import { until } from '../support/wait.ts'

const [configPath, bufferDir] = process.argv.slice(2)
const logs: string[] = []
const agent = new Agent({
  configPath: configPath!,
  bufferDir: bufferDir!,
  log: createLogger('debug', (l) => logs.push(l)),
  timings: { retryIntervalMs: 500, pingIntervalMs: 1000, connectTimeoutS: 5 },
})
await agent.start()
await until('the first batch lost', async () =>
  (agent.status().databases[0]?.lost_batches ?? 0) >= 1 ? true : undefined,
)
await agent.cycleAll()
await agent.cycleAll()
const status = agent.status()
await agent.stop()
process.stdout.write(`${JSON.stringify({ status, logs })}\n`)
