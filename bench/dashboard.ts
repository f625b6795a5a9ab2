// Dashboard first-load benchmark (`bun bench/dashboard.ts`): how many bytes a browser fetches to show
// the dashboard the first time, goal ≤ 300 KB of gzip-compressed JS + CSS.
//
// It starts the app as `dbm serve` builds it (bench/common.ts startServer: createApp over a fresh SQLite
// store on 127.0.0.1; from source, Bun bundles the HTML import itself), fetches `/`, follows every
// `<script src>` and `<link href>` of the page and every static `import … from "…"` of the scripts (what
// the browser loads before the first paint), and gzips each asset with Bun.gzipSync at level 9, the
// size a compressing proxy or CDN would send. Dynamic `import()` chunks, loaded only when a page needs
// them, are listed apart. When dist/dbm exists, the same is measured on the compiled binary's `serve`
// (the bundle it embeds at build time). Prints a Markdown section for bench/RESULTS.md.
// Options: --binary PATH (default dist/dbm; `none` to skip it).
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startServe, stopAllServers } from '../test/support/process.ts'
import { fmt, machine, startServer } from './common.ts'

const GOAL_BYTES = 300 * 1024

interface Asset {
  path: string
  kind: 'html' | 'js' | 'css' | 'other'
  /** Loaded at first paint (page tags and static imports) or only on demand (dynamic import()). */
  lazy: boolean
  bytes: number
  gzip: number
  /** Content-Encoding the server answered with for `Accept-Encoding: gzip`, if any. */
  served: string
}

const kindOf = (path: string, type: string): Asset['kind'] =>
  /\.m?js$/.test(path) || type.includes('javascript')
    ? 'js'
    : /\.css$/.test(path) || type.includes('css')
      ? 'css'
      : /html/.test(type)
        ? 'html'
        : 'other'

async function fetchAsset(base: string, path: string, lazy: boolean): Promise<{ asset: Asset; text: string }> {
  const res = await fetch(base + path, { headers: { 'accept-encoding': 'gzip' } })
  if (!res.ok) throw new Error(`GET ${path}: ${res.status}`)
  const served = res.headers.get('content-encoding') ?? 'identity'
  // fetch() decodes a compressed answer: the body here is the asset itself.
  const body = new Uint8Array(await res.arrayBuffer())
  const gzip = Bun.gzipSync(body, { level: 9 }).byteLength
  return {
    asset: {
      path,
      kind: kindOf(path, res.headers.get('content-type') ?? ''),
      lazy,
      bytes: body.byteLength,
      gzip,
      served,
    },
    text: new TextDecoder().decode(body),
  }
}

/** `/`, its tags' assets, and the scripts' static and dynamic imports, each once. */
async function measure(base: string): Promise<Asset[]> {
  const page = await fetchAsset(base, '/', false)
  const assets: Asset[] = [page.asset]
  const seen = new Set<string>(['/'])
  const queue: { path: string; lazy: boolean }[] = []
  const add = (ref: string, from: string, lazy: boolean) => {
    if (/^(data:|https?:\/\/(?!127\.0\.0\.1))/.test(ref)) return
    const path = new URL(ref, base + from).pathname
    if (seen.has(path)) return
    seen.add(path)
    queue.push({ path, lazy })
  }
  for (const m of page.text.matchAll(/<script\b[^>]*\bsrc="([^"]+)"/g)) add(m[1]!, '/', false)
  for (const m of page.text.matchAll(/<link\b[^>]*\bhref="([^"]+)"/g)) {
    if (/rel="(stylesheet|modulepreload|preload)"/.test(m[0])) add(m[1]!, '/', false)
  }
  while (queue.length > 0) {
    const next = queue.shift()!
    const { asset, text } = await fetchAsset(base, next.path, next.lazy)
    assets.push(asset)
    if (asset.kind !== 'js') continue
    for (const m of text.matchAll(/\bimport\s*(?:[\w$*{}\s,]*?\bfrom\s*)?["']([^"']+)["']/g))
      add(m[1]!, next.path, next.lazy)
    for (const m of text.matchAll(/\bimport\(\s*["']([^"']+)["']\s*\)/g)) add(m[1]!, next.path, true)
  }
  return assets
}

const kb = (n: number) => `${fmt(n / 1024, 1)} KB`

function table(assets: Asset[]): string[] {
  const firstLoad = assets.filter((a) => !a.lazy && (a.kind === 'js' || a.kind === 'css'))
  const total = firstLoad.reduce((s, a) => s + a.gzip, 0)
  const raw = firstLoad.reduce((s, a) => s + a.bytes, 0)
  const rows = assets.map(
    (a) =>
      `| \`${a.path}\` | ${a.kind}${a.lazy ? ' (on demand)' : ''} | ${fmt(a.bytes)} | ${fmt(a.gzip)} | ${a.served} |`,
  )
  return [
    '| asset | kind | bytes | gzip -9 bytes | served with `Accept-Encoding: gzip` |',
    '|---|---|---:|---:|---|',
    ...rows,
    `| **JS + CSS at first load** | | ${fmt(raw)} | **${fmt(total)}** (${kb(total)}) | |`,
    '',
    `First load: **${kb(total)}** of gzip-compressed JS + CSS against the goal of ${kb(GOAL_BYTES)}: ${total <= GOAL_BYTES ? `**met** (${fmt((100 * total) / GOAL_BYTES)} % of it)` : '**missed**'}.`,
  ]
}

function parseBinary(argv: string[]): string | undefined {
  const i = argv.indexOf('--binary')
  if (i === -1) return join(import.meta.dir, '..', 'dist', 'dbm')
  const value = argv[i + 1]
  if (!value) throw new Error('--binary needs a path (or none)')
  return value === 'none' ? undefined : value
}

const binary = parseBinary(process.argv.slice(2))
const dir = mkdtempSync(join(tmpdir(), 'dbm-bench-dashboard-'))
const lines: string[] = []
try {
  const m = await machine()
  const server = await startServer({ dataDir: join(dir, 'source') })
  let source: Asset[]
  let bundleMs: number
  try {
    const started = performance.now()
    await fetch(`${server.base}/`).then((r) => r.arrayBuffer())
    bundleMs = performance.now() - started
    source = await measure(server.base)
  } finally {
    await server.stop()
  }

  let compiled: Asset[] | undefined
  let binaryNote = ''
  if (binary && existsSync(binary)) {
    const serve = await startServe([binary], { dataDir: join(dir, 'binary'), extraArgs: ['--log-level', 'warn'] })
    try {
      compiled = await measure(serve.base)
      binaryNote = `\`${binary.replace(`${join(import.meta.dir, '..')}/`, '')}\` built ${new Date(statSync(binary).mtimeMs).toISOString().replace('T', ' ').slice(0, 16)} UTC`
    } finally {
      await serve.stop()
    }
  }

  lines.push(
    `### ${new Date().toISOString().slice(0, 10)}: first load of the dashboard`,
    '',
    `- Command: \`bun run bench:dashboard${process.argv.length > 2 ? ` ${process.argv.slice(2).join(' ')}` : ''}\``,
    `- Commit: ${m.commit}`,
    `- Machine: ${m.line}`,
    '- Method: GET `/`, then every `<script src>` / `<link rel=stylesheet|modulepreload>` of the page and every static `import` of the scripts; each asset gzipped by Bun.gzipSync at level 9 (what a compressing proxy sends); dynamic `import()` chunks are listed as on demand and left out of the first-load total',
    '',
    `#### From source (createApp; the first \`GET /\` took ${fmt(bundleMs)} ms)`,
    '',
    ...table(source),
  )
  if (compiled) {
    lines.push('', `#### The compiled binary (${binaryNote}, \`dbm serve\`)`, '', ...table(compiled))
  } else {
    lines.push(
      '',
      `The compiled binary was not measured: ${binary ? `\`${binary}\` does not exist (run \`bun run build\` first)` : '--binary none'}.`,
    )
  }
  console.log(lines.join('\n'))
} finally {
  await stopAllServers()
  rmSync(dir, { recursive: true, force: true })
}
