// Part of `bun run test`: the backups test drives a real pgBackRest (Debian's package) against a test
// PostgreSQL. When it is missing, install it with apt-get (as root, or through sudo); the package index
// is refreshed only when the first attempt fails. Where that is impossible, say what to install and fail.
import { existsSync } from 'node:fs'

const PGBACKREST = '/usr/bin/pgbackrest'

if (!existsSync(PGBACKREST)) {
  const root = process.getuid?.() === 0
  const prefix = root ? [] : ['sudo', '-n']
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
  const run = (args: string[]) => {
    try {
      return Bun.spawnSync([...prefix, ...args], { env, stdout: 'inherit', stderr: 'inherit' }).exitCode === 0
    } catch {
      return false // sudo or apt-get is not there
    }
  }
  console.error(`${PGBACKREST} is missing: installing Debian's pgbackrest for the backups test`)
  const install = ['apt-get', 'install', '-y', '--no-install-recommends', 'pgbackrest']
  if (!run(install) && !(run(['apt-get', 'update']) && run(install))) {
    console.error(`could not install pgbackrest (${[...prefix, ...install].join(' ')} failed): install the Debian package "pgbackrest" and run the tests again`)
    process.exit(1)
  }
  if (!existsSync(PGBACKREST)) {
    console.error(`apt-get installed pgbackrest but ${PGBACKREST} is still missing`)
    process.exit(1)
  }
}
