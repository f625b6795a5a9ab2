// Real `dbm` processes for the CLI and end-to-end tests: run a command to completion, or start
// `serve` on a free loopback port and wait for /healthz. Every process has a hard deadline, and
// stopAllServers() kills whatever a failed test left running.
import { join } from 'node:path'
import type { Subprocess } from 'bun'
import { freePort } from './postgres.ts'

export const repoRoot = join(import.meta.dir, '..', '..')

/** The tests' environment without any DBM_* variable, plus `extra`. */
export function cleanEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(process.env)) {
    if (!name.startsWith('DBM_') && value !== undefined) env[name] = value
  }
  return { ...env, ...extra }
}

export interface Finished {
  exitCode: number | null
  stdout: string
  stderr: string
}

/** Runs `cmd` (in the repository root unless `cwd` is given) to completion (killed after `timeoutMs`). */
export async function runCommand(
  cmd: string[],
  options: { env?: Record<string, string>; timeoutMs?: number; cwd?: string } = {},
): Promise<Finished> {
  const proc = Bun.spawn(cmd, {
    cwd: options.cwd ?? repoRoot,
    env: cleanEnv(options.env),
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
    timeout: options.timeoutMs ?? 10_000,
    killSignal: 'SIGKILL',
  })
  const [stdout, stderr, exitCode] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ])
  return { exitCode, stdout, stderr }
}

export interface ServeProcess {
  base: string
  pid: number
  /** Everything the process wrote to stderr so far. */
  stderr(): string
  /** Resolves with the exit code when the process ends by itself. */
  exited: Promise<number>
  /** Sends `signal` and waits (at most 10 s) for the exit; returns the exit code. */
  stop(signal?: 'SIGTERM' | 'SIGINT'): Promise<number | null>
}

const running = new Set<Subprocess>()
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Starts `<command> serve --listen 127.0.0.1:<free port> --data-dir <dataDir> ...extraArgs` and
 * resolves once GET /healthz answers 200; rejects (with the process's stderr) if it exits first.
 */
export async function startServe(
  command: string[],
  options: { dataDir: string; extraArgs?: string[]; env?: Record<string, string> },
): Promise<ServeProcess> {
  const port = await freePort()
  const proc = Bun.spawn(
    [...command, 'serve', '--listen', `127.0.0.1:${port}`, '--data-dir', options.dataDir, ...(options.extraArgs ?? [])],
    {
      cwd: repoRoot,
      env: cleanEnv(options.env),
      stdin: 'ignore',
      stdout: 'ignore',
      stderr: 'pipe',
      // A safety net for a test that forgets its server; a busy machine's slow test runs past a minute.
      timeout: 600_000,
      killSignal: 'SIGKILL',
    },
  )
  running.add(proc)
  void proc.exited.then(() => running.delete(proc))

  let stderr = ''
  const drained = (async () => {
    const decoder = new TextDecoder()
    for await (const chunk of proc.stderr) stderr += decoder.decode(chunk, { stream: true })
  })()

  const base = `http://127.0.0.1:${port}`
  let exitCode: number | undefined
  void proc.exited.then((code) => {
    exitCode = code
  })
  const deadline = Date.now() + 10_000
  for (;;) {
    if (exitCode !== undefined) {
      await drained
      throw new Error(`dbm serve exited with ${exitCode} before it was ready:\n${stderr}`)
    }
    const ok = await fetch(`${base}/healthz`).then(
      (r) => r.status === 200,
      () => false,
    )
    if (ok) break
    if (Date.now() > deadline) {
      proc.kill('SIGKILL')
      throw new Error(`dbm serve did not answer /healthz within 10 s:\n${stderr}`)
    }
    await sleep(50)
  }

  return {
    base,
    pid: proc.pid,
    stderr: () => stderr,
    exited: proc.exited.then(async (code) => {
      await drained
      return code
    }),
    async stop(signal = 'SIGTERM') {
      proc.kill(signal)
      const ended = await Promise.race([proc.exited.then(() => true), sleep(10_000).then(() => false)])
      if (!ended) {
        proc.kill('SIGKILL')
        await proc.exited
        await drained
        throw new Error(`dbm serve did not stop within 10 s of ${signal}:\n${stderr}`)
      }
      await drained
      return proc.exitCode
    },
  }
}

/** Kills every server process a test left running (afterAll / afterEach). */
export async function stopAllServers(): Promise<void> {
  const procs = [...running]
  for (const proc of procs) proc.kill('SIGKILL')
  await Promise.all(procs.map((p) => p.exited))
}

/** A JSON request against a running server; the body is parsed when it is JSON. */
export async function request<T = any>(
  base: string,
  method: string,
  path: string,
  options: { body?: unknown; token?: string; apiKey?: string } = {},
): Promise<{ status: number; body: T }> {
  const headers: Record<string, string> = {}
  if (options.body !== undefined) headers['content-type'] = 'application/json'
  if (options.token) headers.authorization = `Bearer ${options.token}`
  if (options.apiKey) headers['x-api-key'] = options.apiKey
  const res = await fetch(base + path, {
    method,
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  })
  const text = await res.text()
  let body: any = text
  try {
    body = text ? JSON.parse(text) : null
  } catch {}
  return { status: res.status, body }
}
