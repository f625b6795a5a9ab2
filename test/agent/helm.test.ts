// The Helm chart for the agent: its values have the spec's shape (apiKey, apiEndpoint, databases with
// name, dsn, pollInterval), and the config.yaml its Secret template writes is one the agent accepts.
// (No helm binary here: the template's few expressions are filled in by hand for one example.)
import { describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { parse } from 'yaml'
import { parseAgentConfig } from '../../src/agent/config.ts'

const chart = 'deploy/helm/dbm-agent'

describe('helm chart', () => {
  test("values carry the spec's keys", () => {
    const values = parse(readFileSync(`${chart}/values.yaml`, 'utf8'))
    expect(Object.keys(values)).toEqual(expect.arrayContaining(['apiKey', 'apiEndpoint', 'databases']))
    expect(values.databases).toEqual([])
    const example = readFileSync(`${chart}/values.yaml`, 'utf8')
    expect(example).toMatch(/#\s+- name: \w+\n#\s+dsn: postgres:\/\/\S+\n#\s+pollInterval: 10s/)
  })

  test('the Secret template renders a config the agent accepts', () => {
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
        .replace('{{ printf ":%d" (int .Values.healthPort) | quote }}', q(':8081')) +
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
    const config = parseAgentConfig(rendered.replace(/^ {4}/gm, ''))
    expect(config.api).toEqual({ endpoint: 'http://dbm:8080', key })
    expect(config.health.port).toBe(8081)
    expect(config.databases.map((d) => [d.name, d.pollIntervalMs])).toEqual([
      ['orders', 30_000],
      ['events', 10_000],
    ])
  })
})
