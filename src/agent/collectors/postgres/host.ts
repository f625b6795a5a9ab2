// host: the CPU, load, memory and swap of the database's host and the filesystems holding its data
// directory, WAL, tablespaces and log directory, with the I/O of their devices (src/agent/host/). Only
// when the agent runs on that host, which is decided from evidence every cycle (evidence.ts) and named
// in the section; otherwise no section and an info note saying why. CPU shares and device I/O are
// deltas: the first cycle sends none.
import { judgeHost, postgresHostFacts } from '../../host/evidence.ts'
import { type HostMemory, sampleHost } from '../../host/sample.ts'
import type postgres from 'postgres'
import type { PostgresContext } from '../types.ts'
import { registerCollector } from '../registry.ts'

export const NOT_ON_HOST =
  'host figures (CPU, memory, free disk space and its forecast) need the agent on the database host'

export const host = registerCollector<PostgresContext>({
  name: 'host',
  engine: 'postgres',
  defaultEnabled: true,
  checkPart: ({ sql }) => hostLine(sql),
  async collect(ctx) {
    const verdict = await judgeHost(await postgresHostFacts(ctx.sql))
    if (!verdict.onHost) {
      ctx.notes.delete('host')
      ctx.infos?.set('host', `${NOT_ON_HOST}: ${verdict.reason}`)
      ctx.state.delete('host')
      return {}
    }
    ctx.infos?.delete('host')
    const sample = await sampleHost(verdict.paths, (ctx.state.get('host') as HostMemory | undefined) ?? {})
    ctx.state.set('host', sample.memory)
    const notes = [...verdict.notes, ...sample.problems.map((p) => `not measured: ${p}`)]
    if (notes.length > 0) ctx.notes.set('host', notes.join('; '))
    else ctx.notes.delete('host')
    return { host: { source: 'proc', evidence: verdict.evidence.slice(0, 1_000), ...sample.status } }
  },
})

/**
 * `host: on the database host (evidence), measures …`, or why the host collector will send nothing; one
 * part of the line, without `;` (which separates the line's parts).
 */
async function hostLine(sql: postgres.Sql): Promise<string> {
  const verdict = await judgeHost(await postgresHostFacts(sql))
  const part = (text: string) => `host: ${text.replaceAll(';', ',')}`
  if (!verdict.onHost) return part(`no figures, ${verdict.reason}`)
  const measured = verdict.paths.map((p) => `${p.role} ${JSON.stringify(p.path)}`).join(', ')
  return part(
    `on the database host (${verdict.evidence}), measures ${measured || 'no filesystem'}${verdict.notes.length ? ` (${verdict.notes.join(', ')})` : ''}`,
  )
}
