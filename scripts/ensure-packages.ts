// Part of `bun run test`: some tests drive real programs from Debian's packages — Chromium for the
// dashboard's browser tests, pgBackRest for the backups test, Prometheus Alertmanager for the alert
// destinations' Alertmanager test. Each one missing is installed with apt-get (as root, or through
// sudo); the package index is refreshed only when the first attempt fails. Where that is impossible, say
// what to install and fail, so that the README's test command works on a fresh machine or says why not.
// No package's service is started: the tests start their own.
import { existsSync } from 'node:fs'

interface Needed {
  path: string
  pkg: string
  why: string
}

const NEEDED: Needed[] = [
  { path: '/usr/bin/chromium', pkg: 'chromium', why: 'the browser tests' },
  { path: '/usr/bin/pgbackrest', pkg: 'pgbackrest', why: 'the backups test' },
  { path: '/usr/bin/prometheus-alertmanager', pkg: 'prometheus-alertmanager', why: 'the Alertmanager test' },
]

const missing = NEEDED.filter((n) => !existsSync(n.path))
if (missing.length > 0) {
  const prefix = process.getuid?.() === 0 ? [] : ['sudo', '-n']
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
  const run = (args: string[]) => {
    try {
      return Bun.spawnSync([...prefix, ...args], { env, stdout: 'inherit', stderr: 'inherit' }).exitCode === 0
    } catch {
      return false // sudo or apt-get is not there
    }
  }
  for (const n of missing) console.error(`${n.path} is missing: installing Debian's ${n.pkg} for ${n.why}`)
  const install = ['apt-get', 'install', '-y', '--no-install-recommends', ...missing.map((n) => n.pkg)]
  if (!run(install) && !(run(['apt-get', 'update']) && run(install))) {
    const names = missing.map((n) => `"${n.pkg}"`).join(', ')
    console.error(
      `could not install ${names} (${[...prefix, ...install].join(' ')} failed): install the Debian packages ${names} and run the tests again`,
    )
    process.exit(1)
  }
  for (const n of missing) {
    if (!existsSync(n.path)) {
      console.error(`apt-get installed ${n.pkg} but ${n.path} is still missing`)
      process.exit(1)
    }
  }
}
