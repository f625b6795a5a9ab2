// Every relative link of the README and docs/ resolves: a file link names a file of the repository, and an
// anchor (`#postgresql-setup`, `docs/scaling.md#...`) names a heading of its file as GitHub makes its
// anchors (lower case, punctuation but hyphens and underscores dropped, spaces as hyphens, a repeated
// heading numbered -1, -2). Links inside code blocks are code, not links; web addresses are not checked.
import { expect, test } from 'bun:test'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'

const ROOT = join(import.meta.dir, '..', '..')

/** The text outside fenced code blocks and inline code. */
function prose(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '')
}

/** GitHub's anchor of a heading's text. */
function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-')
}

function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>()
  const anchors = new Set<string>()
  for (const m of markdown.replace(/^```[\s\S]*?^```/gm, '').matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = anchorOf(m[1]!.replace(/`/g, ''))
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    anchors.add(n === 0 ? base : `${base}-${n}`)
  }
  return anchors
}

const files = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
]

test('anchors are made as GitHub makes them', () => {
  expect(anchorOf('PostgreSQL setup')).toBe('postgresql-setup')
  expect(anchorOf('Routing, repeats and silences')).toBe('routing-repeats-and-silences')
  expect(anchorOf('Checks of your own (custom_metrics)')).toBe('checks-of-your-own-custom_metrics')
  expect([...anchorsOf('# A\n## A\n```\n# not a heading\n```\n### A\n')]).toEqual(['a', 'a-1', 'a-2'])
})

test('every relative link and anchor in README.md and docs/ resolves', () => {
  const broken: string[] = []
  let checked = 0
  for (const file of files) {
    const text = readFileSync(join(ROOT, file), 'utf8')
    for (const m of prose(text).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = m[1]!
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue // https:, mailto:
      checked++
      const [path, anchor] = target.split('#', 2) as [string, string | undefined]
      const to = path === '' ? join(ROOT, file) : join(ROOT, dirname(file), decodeURIComponent(path))
      if (!existsSync(to)) {
        broken.push(`${file}: ${target} (no file ${relative(ROOT, to)})`)
        continue
      }
      if (anchor !== undefined && to.endsWith('.md') && !anchorsOf(readFileSync(to, 'utf8')).has(anchor))
        broken.push(`${file}: ${target} (no such heading)`)
    }
  }
  expect(broken).toEqual([])
  expect(checked).toBeGreaterThan(3)
})
