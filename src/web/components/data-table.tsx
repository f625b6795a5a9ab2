// A table of rows with sortable column headers (buttons, so the keyboard reaches them). Sorting is
// done here from each column's `sort` value, or by the server: then `serverSort` names the current
// sort and a header click asks for another (the API's sort_by orders are largest first).
// A cell rendered as a plain string has its invisible characters marked (invisible.tsx), so a column that
// shows a monitored name as it is cannot show them raw; cells that build markup use <DbText> themselves.
import type { ComponentChildren } from 'preact'
import { useState } from 'preact/hooks'
import { revealInvisible } from './invisible.tsx'

export interface Column<T> {
  key: string
  label: string
  /** Right-aligned tabular numbers. */
  num?: boolean
  /** The cell's content; a plain string is shown with its invisible characters marked. */
  render(row: T): ComponentChildren
  /** Client-side sort value; the column is sortable when given (and no serverSort is in use). */
  sort?(row: T): number | string | null | undefined
  /** With serverSort: the sort_by value this column asks for. */
  sortBy?: string
  title?: string
  /** Extra class of the column's cells (`stmt-cell`: a statement that shrinks to the space left). */
  cellClass?: string
}

type Direction = 'asc' | 'desc'

export interface DataTableProps<T> {
  columns: Column<T>[]
  rows: T[]
  rowKey(row: T, index: number): string
  caption?: string
  /** Initial client-side sort (a column key), largest first unless `dir` says otherwise. */
  initialSort?: { key: string; dir?: Direction }
  /** Server-side sort: the current sort_by, and what to do when a header asks for another. */
  serverSort?: { value: string; onChange(sortBy: string): void }
  rowClass?(row: T): string | undefined
  compact?: boolean
}

function compare(a: number | string | null | undefined, b: number | string | null | undefined): number {
  const aMissing = a === null || a === undefined
  const bMissing = b === null || b === undefined
  if (aMissing || bMissing) return aMissing === bMissing ? 0 : aMissing ? 1 : -1
  if (typeof a === 'number' && typeof b === 'number') return a - b
  return String(a).localeCompare(String(b))
}

/** A cell's content: a string with its invisible characters marked, anything else as it is. */
const cell = (content: ComponentChildren) => (typeof content === 'string' ? revealInvisible(content) : content)

export function DataTable<T>(props: DataTableProps<T>) {
  const [sort, setSort] = useState<{ key: string; dir: Direction } | undefined>(
    props.initialSort ? { key: props.initialSort.key, dir: props.initialSort.dir ?? 'desc' } : undefined,
  )
  let rows = props.rows
  const column = sort && !props.serverSort ? props.columns.find((c) => c.key === sort.key) : undefined
  if (column?.sort && sort) {
    const value = column.sort
    const sign = sort.dir === 'asc' ? 1 : -1
    rows = [...rows].sort((a, b) => {
      const va = value(a)
      const vb = value(b)
      // Missing values stay last in either direction.
      if (va === null || va === undefined || vb === null || vb === undefined) return compare(va, vb)
      return sign * compare(va, vb)
    })
  }

  const header = (c: Column<T>) => {
    const server = props.serverSort
    if (server && c.sortBy) {
      const active = server.value === c.sortBy
      return (
        <th
          key={c.key}
          class={c.num ? 'num' : undefined}
          aria-sort={active ? 'descending' : undefined}
          title={c.title}
          scope="col"
        >
          <button type="button" class={`sort${active ? ' active' : ''}`} onClick={() => server.onChange(c.sortBy!)}>
            {c.label}
            <span aria-hidden="true">{active ? ' ▾' : ''}</span>
          </button>
        </th>
      )
    }
    if (!server && c.sort) {
      const active = sort?.key === c.key
      const next: Direction = active && sort?.dir === 'desc' ? 'asc' : 'desc'
      return (
        <th
          key={c.key}
          class={c.num ? 'num' : undefined}
          aria-sort={active ? (sort?.dir === 'asc' ? 'ascending' : 'descending') : undefined}
          title={c.title}
          scope="col"
        >
          <button
            type="button"
            class={`sort${active ? ' active' : ''}`}
            onClick={() => setSort({ key: c.key, dir: next })}
          >
            {c.label}
            <span aria-hidden="true">{active ? (sort?.dir === 'asc' ? ' ▴' : ' ▾') : ''}</span>
          </button>
        </th>
      )
    }
    return (
      <th key={c.key} class={c.num ? 'num' : undefined} title={c.title} scope="col">
        {c.label}
      </th>
    )
  }

  return (
    <div class="table-wrap">
      <table class={props.compact ? 'compact' : undefined}>
        {props.caption && <caption class="sr-only">{props.caption}</caption>}
        <thead>
          <tr>{props.columns.map(header)}</tr>
        </thead>
        <tbody>
          {rows.map((row, i) => (
            <tr key={props.rowKey(row, i)} class={props.rowClass?.(row)}>
              {props.columns.map((c) => (
                <td key={c.key} class={[c.num ? 'num' : '', c.cellClass ?? ''].join(' ').trim() || undefined}>
                  {cell(c.render(row))}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  )
}
