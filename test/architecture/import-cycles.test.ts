// No module of src/ imports itself back through others, type-only imports included: a cycle makes load
// order decide whether a constant is ready, and ties together modules that should change apart (a type
// cycle is the second kind). Every `import`, `import type`, `export … from` and `export type … from` of
// src/ counts; dynamic import() does not (it loads later, on demand, and is how the CLI defers the server).
// Bun.Transpiler's scanImports finds the imports; type-only ones, which it erases, are first rewritten as
// plain ones (with verbatimModuleSyntax an unused plain import is still reported).
import { describe, expect, test } from 'bun:test'
import { readFileSync, readdirSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'

const ROOT = resolve(import.meta.dir, '../..')
const SRC = join(ROOT, 'src')

function sourceFiles(dir: string): string[] {
  const out: string[] = []
  for (const name of readdirSync(dir)) {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) out.push(...sourceFiles(path))
    else if (/\.(ts|tsx)$/.test(name) && !name.endsWith('.d.ts')) out.push(path)
  }
  return out
}

/** The module's text with its type-only imports and re-exports written as plain ones. */
export function withTypeImportsAsValues(text: string): string {
  return text
    .replace(/^#!.*/, '')
    .replace(/\bimport\s+type\s+(?=[\w${*])/g, 'import ')
    .replace(/\bexport\s+type\s+(?=[{*])/g, 'export ')
    .replace(/([{,]\s*)type\s+(?=[\w$]+\s*(?:,|\}|\bas\b))/g, '$1')
}

/** Each module's relative imports (static, type-only included) that resolve to a file of src/. */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>()
  const files = sourceFiles(SRC)
  const known = new Set(files)
  for (const file of files) {
    const transpiler = new Bun.Transpiler({ loader: file.endsWith('.tsx') ? 'tsx' : 'ts' })
    const targets = transpiler
      .scanImports(withTypeImportsAsValues(readFileSync(file, 'utf8')))
      .filter((i) => i.kind !== 'dynamic-import')
      .map((i) => i.path)
      .filter((p) => p.startsWith('.'))
      .map((p) => resolve(dirname(file), p))
      .filter((p) => known.has(p))
    graph.set(file, [...new Set(targets)])
  }
  return graph
}

/** The strongly connected components of more than one module, or of one importing itself (Tarjan). */
function components(graph: Map<string, string[]>): string[][] {
  let index = 0
  const indexOf = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const found: string[][] = []
  const visit = (v: string) => {
    indexOf.set(v, index)
    low.set(v, index++)
    stack.push(v)
    onStack.add(v)
    for (const w of graph.get(v) ?? []) {
      if (!indexOf.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, indexOf.get(w)!))
    }
    if (low.get(v) === indexOf.get(v)) {
      const component: string[] = []
      let w: string
      do {
        w = stack.pop()!
        onStack.delete(w)
        component.push(w)
      } while (w !== v)
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component.sort())
    }
  }
  for (const v of [...graph.keys()].sort()) if (!indexOf.has(v)) visit(v)
  return found
}

/** One shortest cycle through the component's first module, as `a.ts -> b.ts -> a.ts` relative to src/. */
function cycleThrough(graph: Map<string, string[]>, component: string[]): string {
  const members = new Set(component)
  const start = component[0]!
  const cameFrom = new Map<string, string>()
  const queue = [start]
  let last: string | undefined
  while (queue.length > 0 && last === undefined) {
    const v = queue.shift()!
    for (const w of graph.get(v) ?? []) {
      if (!members.has(w)) continue
      if (w === start) {
        last = v
        break
      }
      if (!cameFrom.has(w)) {
        cameFrom.set(w, v)
        queue.push(w)
      }
    }
  }
  const path = [start]
  for (let v = last!; v !== start; v = cameFrom.get(v)!) path.splice(1, 0, v)
  path.push(start)
  return `${path.map((f) => relative(SRC, f)).join(' -> ')} (${component.length} modules in the knot)`
}

describe('import cycles', () => {
  test('type-only imports count: they are rewritten as plain ones', () => {
    const text =
      "import type { A } from './a'\nimport { type B, C } from './b'\nexport type { D } from './d'\nimport type * as E from './e'"
    const paths = new Bun.Transpiler({ loader: 'ts' }).scanImports(withTypeImportsAsValues(text)).map((i) => i.path)
    expect(paths).toEqual(['./a', './b', './d', './e'])
  })

  test('none in src/', () => {
    const graph = importGraph()
    expect(components(graph).map((c) => cycleThrough(graph, c))).toEqual([])
  })
})
