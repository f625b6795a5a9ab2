// A real Prometheus Alertmanager (Debian's prometheus-alertmanager, installed by
// scripts/ensure-packages.ts) for tests: started on a loopback port it picks itself (read from its
// "Listening on" log line), clustering off, its storage in a temp dir, one route to a receiver that
// notifies nobody. Ready once /-/ready answers 200; stop() ends the process and removes the dir.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export const ALERTMANAGER_BINARY = '/usr/bin/prometheus-alertmanager'

export interface TestAlertmanager {
  url: string
  /** What it logged so far (for a failed test's message). */
  output(): string
  stop(): Promise<void>
}

const CONFIG = `route:
  receiver: nobody
receivers:
  - name: nobody
`

export async function startAlertmanager(deadlineMs = 10_000): Promise<TestAlertmanager> {
  if (!existsSync(ALERTMANAGER_BINARY))
    throw new Error(
      `${ALERTMANAGER_BINARY} is missing: run bun scripts/ensure-packages.ts (apt-get install prometheus-alertmanager)`,
    )
  const dir = mkdtempSync(join(tmpdir(), 'dbm-alertmanager-'))
  writeFileSync(join(dir, 'alertmanager.yml'), CONFIG)
  const proc = Bun.spawn(
    [
      ALERTMANAGER_BINARY,
      `--config.file=${join(dir, 'alertmanager.yml')}`,
      `--storage.path=${join(dir, 'data')}`,
      '--web.listen-address=127.0.0.1:0',
      '--cluster.listen-address=',
    ],
    { stdout: 'ignore', stderr: 'pipe' },
  )
  let log = ''
  const { promise: listening, resolve } = Promise.withResolvers<string | null>()
  // Read its log to the end (a pipe left unread would block it), and take the port it bound.
  void (async () => {
    const decoder = new TextDecoder()
    for await (const chunk of proc.stderr) {
      log += decoder.decode(chunk, { stream: true })
      const m = /msg="Listening on" address=(127\.0\.0\.1:\d+)/.exec(log)
      if (m) resolve(m[1]!)
    }
    resolve(null)
  })()
  const stop = async () => {
    proc.kill()
    await proc.exited
    rmSync(dir, { recursive: true, force: true })
  }
  const deadline = Date.now() + deadlineMs
  const timer = setTimeout(() => resolve(null), deadlineMs)
  const address = await listening
  clearTimeout(timer)
  if (!address) {
    await stop()
    throw new Error(`alertmanager did not start listening:\n${log}`)
  }
  const url = `http://${address}`
  while (true) {
    const ready = await fetch(`${url}/-/ready`, { signal: AbortSignal.timeout(1000) }).then(
      (r) => r.status === 200,
      () => false,
    )
    if (ready) break
    if (Date.now() > deadline || proc.exitCode !== null) {
      await stop()
      throw new Error(`alertmanager at ${url} not ready:\n${log}`)
    }
    await Bun.sleep(50)
  }
  return { url, output: () => log, stop }
}
