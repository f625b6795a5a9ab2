// The colour theme: the user's choice of System, Light or Dark. System (the default, nothing stored)
// follows the operating system's prefers-color-scheme, live; only a choice made in the header is stored
// (localStorage "dbm-theme-choice"). The theme in use is <html data-theme>, set before the first render.
import { useEffect, useLayoutEffect, useState } from 'preact/hooks'

export type ThemeChoice = 'system' | 'light' | 'dark'
export type Theme = 'light' | 'dark'

export const THEME_CHOICES: [ThemeChoice, string][] = [
  ['system', 'System'],
  ['light', 'Light'],
  ['dark', 'Dark'],
]

const KEY = 'dbm-theme-choice'
/** Where earlier versions wrote the theme on every first visit (so not a choice): removed, not read. */
const LEGACY_KEY = 'dbm-theme'
const DARK_QUERY = '(prefers-color-scheme: dark)'

/** A stored value as a choice: anything but "light" or "dark" is System. */
export const parseChoice = (stored: string | null | undefined): ThemeChoice =>
  stored === 'light' || stored === 'dark' ? stored : 'system'

export const resolveTheme = (choice: ThemeChoice, prefersDark: boolean): Theme =>
  choice === 'system' ? (prefersDark ? 'dark' : 'light') : choice

function readChoice(): ThemeChoice {
  try {
    return parseChoice(localStorage.getItem(KEY))
  } catch {
    return 'system'
  }
}

function storeChoice(choice: ThemeChoice): void {
  try {
    if (choice === 'system') localStorage.removeItem(KEY)
    else localStorage.setItem(KEY, choice)
  } catch {
    // Storage refused (private mode): the choice lasts for this page only.
  }
}

const prefersDark = () => matchMedia(DARK_QUERY).matches

/** Sets <html data-theme> from the stored choice at once, before the first render (no flash of the other theme). */
export function applyInitialTheme(): void {
  try {
    localStorage.removeItem(LEGACY_KEY)
  } catch {
    // Nothing to clean up without storage.
  }
  document.documentElement.dataset.theme = resolveTheme(readChoice(), prefersDark())
}

/** The user's choice and a setter that stores it; <html data-theme> follows the choice and, for System, the OS. */
export function useTheme(): [ThemeChoice, (choice: ThemeChoice) => void] {
  const [choice, setChoice] = useState<ThemeChoice>(readChoice)
  const [dark, setDark] = useState(prefersDark)
  useEffect(() => {
    const media = matchMedia(DARK_QUERY)
    const onChange = (e: MediaQueryListEvent) => setDark(e.matches)
    media.addEventListener('change', onChange)
    return () => media.removeEventListener('change', onChange)
  }, [])
  const theme = resolveTheme(choice, dark)
  useLayoutEffect(() => {
    document.documentElement.dataset.theme = theme
  }, [theme])
  const choose = (next: ThemeChoice) => {
    storeChoice(next)
    setChoice(next)
  }
  return [choice, choose]
}
