// Runs the operator's backup command (an argv list from the agent config, never through a shell) under
// a deadline that kills it and its children, with its output bounded: what the `backups` collector reads.
// A command that hangs, fails, or prints more than the bound gives an `error` line, never an exception;
// that line (its exit code and the first line of stderr, or of stdout when stderr is empty) is masked, as it may name a repository's credentials.
import { spawn } from 'node:child_process'
import { redactSecrets } from '../../shared/redact.ts'

export interface CommandResult {
  /** Standard output, when the command exited 0 within the deadline and the bound. */
  stdout: string | null
  /** Why there is no output to read; null when there is. */
  error: string | null
}

export interface CommandLimits {
  timeoutMs: number
  /** Most bytes of standard output read; past it the command is killed. */
  maxOutputBytes: number
}

export const defaultCommandLimits: CommandLimits = { timeoutMs: 60_000, maxOutputBytes: 8 * 1024 * 1024 }

/** Most bytes of stderr kept, for its first line. */
const MAX_STDERR_BYTES = 64 * 1024
/** Longest error line, as the wire's nullable log text allows. */
const MAX_ERROR = 1_000

/** key=value and key: value pairs whose name says secret (repo1-s3-key-secret=..., AWS_SECRET_ACCESS_KEY=...). */
const SECRET_PAIR =
  /([A-Za-z0-9_.-]*(?:secret|token|password|passphrase|credential|access[-_]?key|key[-_]?id|cipher[-_]pass)[A-Za-z0-9_.-]*\s*[=:]\s*)("[^"]*"|'[^']*'|[^\s,;]+)/gi

/** A line of a tool's output made safe to send: passwords of URLs and secret-looking pairs masked, control characters gone. */
export function maskLine(text: string): string {
  return redactSecrets(text)
    .replace(SECRET_PAIR, '$1***')
    .replace(/[\u0000-\u001f\u007f]/g, ' ')
    .trim()
}

function firstLine(stderr: string): string {
  const line = stderr.split(/\r?\n/).find((l) => l.trim() !== '') ?? ''
  return maskLine(line)
}

const cut = (text: string) => (text.length > MAX_ERROR ? `${text.slice(0, MAX_ERROR - 1)}…` : text)

/**
 * Runs `argv` with the agent's environment and no stdin. The command runs in its own process group, so
 * that the deadline kills what it started too (a wrapper script's children would otherwise keep the pipes
 * open); the answer does not wait for the pipes to close after a kill.
 */
export function runCommand(
  argv: readonly string[],
  limits: CommandLimits = defaultCommandLimits,
): Promise<CommandResult> {
  return new Promise((resolve) => {
    const name = argv[0] ?? ''
    let settled = false
    const finish = (result: CommandResult) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      resolve(result)
    }
    let child: ReturnType<typeof spawn>
    try {
      child = spawn(name, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], detached: true })
    } catch (e) {
      finish({ stdout: null, error: cut(`${maskLine(name)} could not start: ${maskLine((e as Error).message)}`) })
      return
    }
    const kill = () => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL')
      } catch {
        child.kill('SIGKILL')
      }
      child.stdout?.destroy()
      child.stderr?.destroy()
    }
    const timer = setTimeout(() => {
      kill()
      finish({
        stdout: null,
        error: cut(`${maskLine(name)} did not finish within ${limits.timeoutMs / 1000} s and was killed`),
      })
    }, limits.timeoutMs)
    const out: Buffer[] = []
    let outBytes = 0
    const err: Buffer[] = []
    let errBytes = 0
    child.stdout?.on('data', (chunk: Buffer) => {
      outBytes += chunk.length
      if (outBytes > limits.maxOutputBytes) {
        kill()
        finish({
          stdout: null,
          error: `${maskLine(name)} printed more than ${limits.maxOutputBytes} bytes and was killed`,
        })
        return
      }
      out.push(chunk)
    })
    child.stderr?.on('data', (chunk: Buffer) => {
      if (errBytes >= MAX_STDERR_BYTES) return
      errBytes += chunk.length
      err.push(chunk)
    })
    child.on('error', (e) => {
      const code = (e as NodeJS.ErrnoException).code
      const why = code === 'ENOENT' ? 'not found' : code === 'EACCES' ? 'not executable' : maskLine(e.message)
      finish({ stdout: null, error: cut(`${maskLine(name)} could not start: ${why}`) })
    })
    child.on('close', (code, signal) => {
      if (settled) return
      const stderr = Buffer.concat(err).toString('utf8')
      if (code === 0) {
        finish({ stdout: Buffer.concat(out).toString('utf8'), error: null })
        return
      }
      const how = signal ? `was killed by ${signal}` : `exited with code ${code}`
      // pgBackRest prints its errors on stdout unless log-level-stderr is set: stderr first, else stdout.
      const line = firstLine(stderr) || firstLine(Buffer.concat(out).subarray(0, MAX_STDERR_BYTES).toString('utf8'))
      finish({ stdout: null, error: cut(`${maskLine(name)} ${how}${line ? `: ${line}` : ''}`) })
    })
  })
}
