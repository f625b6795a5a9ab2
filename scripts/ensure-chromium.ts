// Part of `bun run test`: the dashboard's browser tests drive Debian's Chromium (/usr/bin/chromium).
// When it is missing, install it with apt-get (as root, or through sudo), so that the README's test
// command works on a fresh machine; where that is impossible, say what to install and fail.
import { existsSync } from 'node:fs'

const CHROMIUM = '/usr/bin/chromium'

if (!existsSync(CHROMIUM)) {
  const root = process.getuid?.() === 0
  const prefix = root ? [] : ['sudo', '-n']
  console.error(`${CHROMIUM} is missing: installing Debian's chromium for the browser tests`)
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
  for (const args of [['apt-get', 'update'], ['apt-get', 'install', '-y', '--no-install-recommends', 'chromium']]) {
    let ok = false
    try {
      ok = Bun.spawnSync([...prefix, ...args], { env, stdout: 'inherit', stderr: 'inherit' }).exitCode === 0
    } catch {
      // sudo or apt-get is not there
    }
    if (!ok) {
      console.error(`could not install chromium (${[...prefix, ...args].join(' ')} failed): install the Debian package "chromium" and run the tests again`)
      process.exit(1)
    }
  }
  if (!existsSync(CHROMIUM)) {
    console.error(`apt-get installed chromium but ${CHROMIUM} is still missing`)
    process.exit(1)
  }
}
