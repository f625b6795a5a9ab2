// --open: the sign-in link in the desktop's browser (xdg-open on Linux and BSD when DISPLAY or
// WAYLAND_DISPLAY says a desktop exists, open on macOS, start on Windows). The command is given the
// file:// URL of the 0600 page that leads to the link (link-file.ts), never the link: a command line is
// there for every user of the machine to read. A failure is a warning.
import type { Logger } from '../shared/log.ts'
import type { LinkFile } from './link-file.ts'

type Spawn = (command: string[], options: Parameters<typeof Bun.spawn>[1]) => { unref(): void; exited: Promise<number> }

/** The command that opens `url`, or undefined when there is no desktop to open it on. */
export function openCommand(
  platform: NodeJS.Platform,
  env: Record<string, string | undefined>,
  url: string,
): string[] | undefined {
  if (platform === 'darwin') return ['open', url]
  // `start`'s first quoted argument is a window title: an empty one, then the URL.
  if (platform === 'win32') return ['cmd', '/c', 'start', '""', url]
  if (!env.DISPLAY && !env.WAYLAND_DISPLAY) return undefined
  return ['xdg-open', url]
}

/** Opens the page of `file` in the desktop's browser; returns the command it ran, if any. */
export function openBrowser(
  file: LinkFile,
  log: Logger,
  platform: NodeJS.Platform = process.platform,
  env: Record<string, string | undefined> = process.env,
  spawn: Spawn = Bun.spawn as unknown as Spawn,
): string[] | undefined {
  const command = openCommand(platform, env, file.url)
  if (!command) {
    log.warn('--open: no desktop (neither DISPLAY nor WAYLAND_DISPLAY is set); open the sign-in link yourself')
    return undefined
  }
  try {
    const proc = spawn(command, {
      stdin: 'ignore',
      stdout: 'ignore',
      stderr: 'ignore',
      env: env as Record<string, string>,
    })
    proc.unref()
    void proc.exited.then((code) => {
      if (code !== 0)
        log.warn('--open: the browser could not be opened; open the sign-in link yourself', {
          command: command[0],
          exit_code: code,
        })
    })
  } catch (e) {
    log.warn('--open: the browser could not be opened; open the sign-in link yourself', {
      command: command[0],
      cause: (e as Error).message,
    })
  }
  return command
}
