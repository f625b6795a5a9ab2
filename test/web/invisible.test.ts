// Invisible and direction-changing characters in text from a monitored database are shown as marked
// ⟨U+XXXX⟩ (a statement cannot read as something it is not), and the text itself is left as it is;
// escapeInvisible does the same for strings (titles, labels), <DbText> also isolates the text (<bdi>).
import { describe, expect, test } from 'bun:test'
import type { VNode } from 'preact'
import {
  DbText,
  INVISIBLE,
  escapeInvisible,
  hasInvisible,
  revealInvisible,
} from '../../src/web/components/invisible.tsx'

/** The nodes as the text a reader sees, and the markers' titles. */
function shown(text: string): { text: string; titles: string[] } {
  const nodes = revealInvisible(text)
  const list = Array.isArray(nodes) ? nodes : [nodes]
  const titles: string[] = []
  const parts = list.map((n) => {
    if (typeof n === 'string') return n
    const v = n as VNode<{ title: string; class: string; children: unknown }>
    expect(v.props.class).toBe('invisible-char')
    titles.push(v.props.title)
    return ([] as unknown[]).concat(v.props.children).join('')
  })
  return { text: parts.join(''), titles }
}

describe('revealInvisible', () => {
  test('text without such characters is returned as it is (tabs, newlines, quotes, unicode)', () => {
    const plain = "SELECT 'a\\b' /* */ FROM \"t\"\n\twhere x = 'ünïcødé 表 🐘'"
    expect(hasInvisible(plain)).toBe(false)
    expect(revealInvisible(plain)).toBe(plain)
  })

  test('the Trojan Source override is shown, in place, with its name', () => {
    // Reads as `if (is_admin)` with the override applied; shown, it cannot.
    const text = 'SELECT 1 /*\u202e } \u2066if (is_admin)\u2069 \u2066 begin admins only */'
    expect(hasInvisible(text)).toBe(true)
    const s = shown(text)
    expect(s.text).toBe('SELECT 1 /*⟨U+202E⟩ } ⟨U+2066⟩if (is_admin)⟨U+2069⟩ ⟨U+2066⟩ begin admins only */')
    expect(s.titles).toEqual([
      'U+202E right-to-left override',
      'U+2066 left-to-right isolate',
      'U+2069 pop directional isolate',
      'U+2066 left-to-right isolate',
    ])
  })

  test('runs of marks, zero-width characters, separators, controls and the BOM each get a marker', () => {
    const s = shown('a\u200b\u200f\u2028b\u0000\u001b[31m\ufeff\u00ad')
    expect(s.text).toBe('a⟨U+200B⟩⟨U+200F⟩⟨U+2028⟩b⟨U+0000⟩⟨U+001B⟩[31m⟨U+FEFF⟩⟨U+00AD⟩')
    expect(s.titles[0]).toBe('U+200B zero width space')
    expect(s.titles[3]).toBe('U+0000 invisible character')
  })
})

describe('escapeInvisible', () => {
  test('each invisible character becomes ⟨U+XXXX⟩; tabs, newlines and visible unicode stay', () => {
    expect(escapeInvisible('orders\u202e\u2066\u200b\u0007\n\tü 表')).toBe(
      'orders⟨U+202E⟩⟨U+2066⟩⟨U+200B⟩⟨U+0007⟩\n\tü 表',
    )
    expect(INVISIBLE.test(escapeInvisible('\u0000\u001b\u00ad\u061c\u180e\u200b\u2028\u202a\u2060\u206f\ufeff'))).toBe(
      false,
    )
    // Text hidden in tag characters ("ASCII smuggling"), fillers that draw blank, annotation marks, variation selectors.
    expect(escapeInvisible('shop\u{e0044}\u{e0052}\u3164\ufff9x\ufffb\u034f\ufe0f\u{e0100}-db')).toBe(
      'shop⟨U+E0044⟩⟨U+E0052⟩⟨U+3164⟩⟨U+FFF9⟩x⟨U+FFFB⟩⟨U+034F⟩⟨U+FE0F⟩⟨U+E0100⟩-db',
    )
    const plain = 'SELECT "a" FROM t'
    expect(escapeInvisible(plain)).toBe(plain)
  })
})

describe('DbText', () => {
  test('a <bdi> holding the marked text; nothing for null; numbers as they are', () => {
    const v = DbText({ text: 'a\u202eb' }) as VNode<{ children: unknown }>
    expect(v.type).toBe('bdi')
    expect(shownNodes(v.props.children)).toBe('a⟨U+202E⟩b')
    expect(DbText({ text: null })).toBeNull()
    expect(DbText({ text: undefined })).toBeNull()
    expect((DbText({ text: 42 }) as VNode<{ children: unknown }>).props.children).toBe('42')
  })
})

/** Nodes as the text they show. */
function shownNodes(nodes: unknown): string {
  if (typeof nodes === 'string') return nodes
  if (Array.isArray(nodes)) return nodes.map(shownNodes).join('')
  return shownNodes((nodes as VNode<{ children: unknown }>).props.children)
}
