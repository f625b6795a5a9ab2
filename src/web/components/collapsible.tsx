// Folding for long pages: <Collapsible> is a section whose body opens and closes from a button in its
// heading (aria-expanded, aria-controls; the body is not rendered while closed, so a long page stays short
// and light on a phone), and <FoldedList> shows the first few items of a list with a "Show N more" button
// that lists the rest and moves the focus to the first item it revealed. Pages fold what is not critical:
// an Issues or Doctor page opens its critical items and closes the others.
import type { ComponentChildren } from 'preact'
import { useEffect, useId, useRef, useState } from 'preact/hooks'

export interface CollapsibleProps {
  /** The heading's text or markup (monitored text inside it goes through <DbText>). */
  title: ComponentChildren
  /** Said after the title while closed and open: a count, a badge, a time. */
  summary?: ComponentChildren
  /** Open at first (uncontrolled). */
  defaultOpen?: boolean
  /** Controlled: open when true; `onToggle` is told of each change. */
  open?: boolean
  onToggle?(open: boolean): void
  /** The heading level of the title (2 to 4): pages keep their outline. */
  level?: 2 | 3 | 4
  /** Extra classes on the section (`panel`, a severity such as `critical`). */
  class?: string
  id?: string
  children: ComponentChildren
}

export function Collapsible(props: CollapsibleProps) {
  const [own, setOwn] = useState(props.defaultOpen ?? false)
  const open = props.open ?? own
  const bodyId = useId()
  const toggle = () => {
    const next = !open
    if (props.open === undefined) setOwn(next)
    props.onToggle?.(next)
  }
  const Heading = `h${props.level ?? 3}` as 'h3'
  return (
    <section id={props.id} class={`collapsible ${props.class ?? ''}`} data-open={open ? 'true' : 'false'}>
      <Heading class="collapsible-head">
        <button type="button" class="collapsible-toggle" aria-expanded={open} aria-controls={bodyId} onClick={toggle}>
          <span class="collapsible-mark" aria-hidden="true" />
          <span class="collapsible-title">{props.title}</span>
        </button>
        {props.summary !== undefined && <span class="collapsible-summary">{props.summary}</span>}
      </Heading>
      <div id={bodyId} class="collapsible-body" hidden={!open}>
        {open && props.children}
      </div>
    </section>
  )
}

export interface FoldedListProps<T> {
  items: readonly T[]
  /** How many show before "Show N more" (default 5). */
  shown?: number
  /** Each item, keyed by `keyOf`. */
  render(item: T, index: number): ComponentChildren
  keyOf(item: T, index: number): string | number
  /** What the items are, for the button: "Show 12 more findings". */
  noun?: string
  class?: string
}

/** The first `shown` items of a list, then a button that lists the rest (and one that folds them again). */
export function FoldedList<T>({ items, shown = 5, render, keyOf, noun = '', class: className }: FoldedListProps<T>) {
  const [all, setAll] = useState(false)
  const firstRevealed = useRef<HTMLLIElement>(null)
  const revealed = useRef(false)
  useEffect(() => {
    if (all && revealed.current) firstRevealed.current?.focus()
    revealed.current = false
  }, [all])
  // One or two hidden items are listed rather than folded behind a button that saves nothing.
  const folds = items.length > shown + 2
  const visible = folds && !all ? items.slice(0, shown) : items
  const rest = items.length - shown
  return (
    <>
      <ul class={`folded-list ${className ?? ''}`}>
        {visible.map((item, i) => (
          <li
            key={keyOf(item, i)}
            ref={i === shown ? firstRevealed : undefined}
            tabIndex={i === shown ? -1 : undefined}
          >
            {render(item, i)}
          </li>
        ))}
      </ul>
      {folds && (
        <button
          type="button"
          class="link folded-more"
          aria-expanded={all}
          onClick={() => {
            revealed.current = !all
            setAll(!all)
          }}
        >
          {all ? `Show the first ${shown} only` : `Show ${rest} more${noun ? ` ${noun}` : ''}`}
        </button>
      )}
    </>
  )
}
