// The Helm chart for the agent: its values have the spec's shape (apiKey, apiEndpoint, databases with
// name, dsn, pollInterval), the config.yaml its Secret template writes is one the agent accepts, with
// the health endpoint on loopback unless healthAddress is set, and the probes reach it there (they run
// in the container: run here with bash against a listener on 127.0.0.1).
// (No helm binary here: the templates' few expressions are filled in by hand.)
import { describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { parse } from 'yaml'
import { parseAgentConfig } from '../../src/agent/config.ts'
import { runCommand } from '../support/process.ts'

const chart = 'deploy/helm/dbm-agent'

describe('helm chart', () => {
  test("values carry the spec's keys", () => {
    const values = parse(readFileSync(`${chart}/values.yaml`, 'utf8'))
    expect(Object.keys(values)).toEqual(expect.arrayContaining(['apiKey', 'apiEndpoint', 'databases']))
    expect(values.databases).toEqual([])
    expect({ healthAddress: values.healthAddress, healthPort: values.healthPort }).toEqual({
      healthAddress: '127.0.0.1',
      healthPort: 8081,
    })
    const example = readFileSync(`${chart}/values.yaml`, 'utf8')
    expect(example).toMatch(/#\s+- name: \w+\n#\s+dsn: postgres:\/\/\S+\n#\s+pollInterval: 10s/)
  })

  /** config.yaml as the Secret template writes it for these values (the listen address's `default` included). */
  function renderConfig(values: { healthAddress?: string; healthPort: number }) {
    const template = readFileSync(`${chart}/templates/secret.yaml`, 'utf8')
    const block = template.split('config.yaml: |\n')[1]!.split('{{- end }}\n{{- end }}')[0]!
    const key = `dbm_ak_0123456789abcdef_${'a'.repeat(43)}`
    const databases = [
      { name: 'orders', dsn: 'postgres://m:pw@orders:5432/orders', pollInterval: '30s' },
      { name: 'events', dsn: 'postgres://m:pw@events:5432/events' },
    ]
    const [head, item] = block.split('    {{- range .Values.databases }}\n') as [string, string]
    const q = (v: string) => JSON.stringify(v)
    // `{{-` trims the whitespace before it, so each item starts on a new line and trailing blanks vanish.
    const rendered =
      head
        .trimEnd()
        .replace('{{ .Values.apiEndpoint | quote }}', q('http://dbm:8080'))
        .replace('{{ .Values.apiKey | quote }}', q(key))
        .replace(
          '{{ printf "%s:%d" (.Values.healthAddress | default "127.0.0.1") (int .Values.healthPort) | quote }}',
          q(`${values.healthAddress || '127.0.0.1'}:${values.healthPort}`),
        ) +
      databases
        .map((d) =>
          item
            .replace('{{ required "every database needs a name" .name | quote }}', q(d.name))
            .replace('{{ required "every database needs a dsn" .dsn | quote }}', q(d.dsn))
            .replace('{{ .pollInterval | default "10s" | quote }}', q(d.pollInterval ?? '10s'))
            .trimEnd(),
        )
        .map((text) => `\n${text}`)
        .join('')
    expect(rendered).not.toContain('{{')
    return { config: parseAgentConfig(rendered.replace(/^ {4}/gm, '')), key }
  }

  test('the Secret template renders a config the agent accepts, its health endpoint on loopback', () => {
    const values = parse(readFileSync(`${chart}/values.yaml`, 'utf8'))
    const { config, key } = renderConfig(values)
    expect(config.api).toEqual({ endpoint: 'http://dbm:8080', key })
    expect(config.health).toEqual({ listenAddr: '127.0.0.1:8081', hostname: '127.0.0.1', port: 8081 })
    expect(config.databases.map((d) => [d.name, d.pollIntervalMs])).toEqual([
      ['orders', 30_000],
      ['events', 10_000],
    ])
    // Unset or empty is loopback too; all interfaces only when asked for.
    expect(renderConfig({ healthAddress: '', healthPort: 9100 }).config.health.hostname).toBe('127.0.0.1')
    expect(renderConfig({ healthAddress: '0.0.0.0', healthPort: 9100 }).config.health).toEqual({
      listenAddr: '0.0.0.0:9100',
      hostname: '0.0.0.0',
      port: 9100,
    })
    expect(renderConfig({ healthAddress: '[::]', healthPort: 9100 }).config.health.hostname).toBe('::')
  })

  test('the probes run in the container against 127.0.0.1; the port is declared only off loopback', async () => {
    const template = readFileSync(`${chart}/templates/deployment.yaml`, 'utf8')
    expect(template).not.toContain('httpGet')
    expect(template).toContain(
      '          {{- if ne (.Values.healthAddress | default "127.0.0.1") "127.0.0.1" }}\n          ports:\n            - name: health\n              containerPort: {{ .Values.healthPort }}\n          {{- end }}\n',
    )
    const probes = [...template.matchAll(/^ {10}(liveness|readiness)Probe:\n {12}exec:\n {14}command: (.*)$/gm)]
    expect(probes.map((m) => m[1])).toEqual(['liveness', 'readiness'])
    const listeners = [200, 503].map((status) =>
      Bun.serve({
        hostname: '127.0.0.1',
        port: 0,
        fetch: (r) => new Response('{}', { status: new URL(r.url).pathname === '/healthz' ? status : 404 }),
      }),
    )
    try {
      const run = async (line: string, port: number) => {
        const command = parse(line.replace('{{ int .Values.healthPort }}', String(port))) as string[]
        expect(command.slice(0, 2)).toEqual(['/bin/bash', '-c'])
        return (await runCommand(command, { timeoutMs: 5000 })).exitCode
      }
      for (const [, , line] of probes) {
        expect(await run(line!, listeners[0]!.port!)).toBe(0)
        expect(await run(line!, listeners[1]!.port!)).not.toBe(0)
      }
    } finally {
      for (const l of listeners) l.stop(true)
    }
  })
})
