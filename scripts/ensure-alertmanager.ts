// Part of `bun run test`: the alert destinations' Alertmanager test drives a real Prometheus Alertmanager
// (Debian's package, /usr/bin/prometheus-alertmanager). When it is missing, install it with apt-get (as
// root, or through sudo); the package index is refreshed only when the first attempt fails. Where that is
// impossible, say what to install and fail. The package's service is not started: the test runs its own.
import { existsSync } from 'node:fs'

const ALERTMANAGER = '/usr/bin/prometheus-alertmanager'

if (!existsSync(ALERTMANAGER)) {
  const root = process.getuid?.() === 0
  const prefix = root ? [] : ['sudo', '-n']
  // policy-rc.d's answer is not asked: in a container there is no init to start the service anyway.
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
  const run = (args: string[]) => {
    try {
      return Bun.spawnSync([...prefix, ...args], { env, stdout: 'inherit', stderr: 'inherit' }).exitCode === 0
    } catch {
      return false // sudo or apt-get is not there
    }
  }
  console.error(`${ALERTMANAGER} is missing: installing Debian's prometheus-alertmanager for the Alertmanager test`)
  const install = ['apt-get', 'install', '-y', '--no-install-recommends', 'prometheus-alertmanager']
  if (!run(install) && !(run(['apt-get', 'update']) && run(install))) {
    console.error(`could not install prometheus-alertmanager (${[...prefix, ...install].join(' ')} failed): install the Debian package "prometheus-alertmanager" and run the tests again`)
    process.exit(1)
  }
  if (!existsSync(ALERTMANAGER)) {
    console.error(`apt-get installed prometheus-alertmanager but ${ALERTMANAGER} is still missing`)
    process.exit(1)
  }
}
