// The `dbm agent` command: finds and validates the config, then either checks every database once
// (--check) or runs until SIGINT/SIGTERM; SIGHUP reloads the config like an edit of the file does.
import { createLogger, type LogLevel } from '../shared/log.ts'
import { redactSecrets } from '../shared/redact.ts'
import { Agent } from './agent.ts'
import { checkApi, checkBufferDir, checkConfig } from './check.ts'
import { ConfigError, findConfigPath, loadAgentConfig } from './config.ts'
import { lockDirectory } from './dir-lock.ts'

export interface AgentFlags {
  config?: string
  check?: string
  'buffer-dir'?: string
  'log-level'?: string
}

export async function runAgent(
  flags: AgentFlags,
  env: Record<string, string | undefined>,
  cwd: string,
): Promise<number> {
  const log = createLogger((flags['log-level'] ?? env.DBM_LOG_LEVEL ?? 'info') as LogLevel)
  let path: string
  try {
    path = findConfigPath(flags.config, env, cwd)
    if (flags.check) {
      const config = loadAgentConfig(path)
      const bufferDir = flags['buffer-dir'] ?? env.DBM_AGENT_BUFFER_DIR ?? cwd
      const buffer = checkBufferDir(bufferDir)
      const lines = await Promise.all([checkApi(config), checkConfig(config)]).then(([api, dbs]) => [
        api,
        ...dbs,
        ...(buffer.ok ? [] : [buffer]),
      ])
      for (const l of lines) process.stdout.write(`${redactSecrets(l.line)}\n`)
      return lines.every((l) => l.ok) ? 0 : 1
    }
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`${redactSecrets(e.message)}\n`)
      return 1
    }
    throw e
  }
  const bufferDir = flags['buffer-dir'] ?? env.DBM_AGENT_BUFFER_DIR ?? cwd
  // Two agents on one buffer and state directory would both send every delta (double counts): the
  // second one stops here, before it reads any state. The lock goes with the process.
  const lock = lockDirectory(bufferDir, 'agent')
  if ('problem' in lock) {
    process.stderr.write(`dbm agent: ${lock.problem}\n`)
    return 1
  }
  if (!('release' in lock)) {
    process.stderr.write(
      `dbm agent: another dbm agent${lock.holder ? ` (pid ${lock.holder})` : ''} is running on ${bufferDir}; stop it first, or give this one another --buffer-dir\n`,
    )
    return 1
  }
  const agent = new Agent({ configPath: path, bufferDir, log })
  try {
    await agent.start()
  } catch (e) {
    lock.release()
    if (e instanceof ConfigError) {
      process.stderr.write(`${redactSecrets(e.message)}\n`)
      return 1
    }
    throw e
  }
  return new Promise((resolve) => {
    let stopping = false
    const stop = async (signal: string) => {
      if (stopping) return
      stopping = true
      log.info('stopping', { signal })
      await agent.stop()
      lock.release()
      resolve(0)
    }
    process.once('SIGINT', () => void stop('SIGINT'))
    process.once('SIGTERM', () => void stop('SIGTERM'))
    process.on('SIGHUP', () => void agent.reload())
  })
}
