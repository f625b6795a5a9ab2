// The Configuration page's words for pg_settings' raw figures: a default in SHOW's form (boot_val with
// its unit, as PostgreSQL prints the value), a source in a DBA's words, and which findings name a setting.
import { describe, expect, test } from 'bun:test'
import { findingNames, showForm, sourceLabel } from '../../src/server/routes/configuration.ts'

describe('showForm', () => {
  test('a raw value in its unit as SHOW prints it: the largest unit that holds it whole', () => {
    expect(showForm('16384', '8kB')).toBe('128MB')
    expect(showForm('4096', 'kB')).toBe('4MB')
    expect(showForm('65536', 'kB')).toBe('64MB')
    expect(showForm('1000', 'kB')).toBe('1000kB')
    expect(showForm('2048', '16MB')).toBe('32GB')
    expect(showForm('60', 's')).toBe('1min')
    expect(showForm('200', 'ms')).toBe('200ms')
    expect(showForm('86400', 's')).toBe('1d')
    expect(showForm('2', 'ms')).toBe('2ms')
    expect(showForm('0.5', 'ms')).toBe('500us')
  })
  test('0, -1 (off), text and no unit stay as they are', () => {
    expect(showForm('0', 'ms')).toBe('0')
    expect(showForm('-1', 'kB')).toBe('-1')
    expect(showForm('on', null)).toBe('on')
    expect(showForm('', 'kB')).toBe('')
    expect(showForm(null, 'kB')).toBeNull()
    expect(showForm('12', 'widgets')).toBe('12')
  })
})

describe('sourceLabel', () => {
  test('file:line, ALTER SYSTEM for postgresql.auto.conf, the ALTER that set it, else the source', () => {
    expect(sourceLabel({ source: 'configuration file', file: '/var/lib/pg/postgresql.conf', line: 64 })).toBe(
      'postgresql.conf:64',
    )
    expect(sourceLabel({ source: 'configuration file', file: '/var/lib/pg/postgresql.auto.conf', line: 3 })).toBe(
      'ALTER SYSTEM',
    )
    expect(sourceLabel({ source: 'configuration file', file: null, line: null })).toBe('configuration file')
    expect(sourceLabel({ source: 'database' })).toBe('ALTER DATABASE')
    expect(sourceLabel({ source: 'database user' })).toBe('ALTER ROLE IN DATABASE')
    expect(sourceLabel({ source: 'command line' })).toBe('command line')
    expect(sourceLabel({ source: 'default' })).toBe('default')
  })
})

describe('findingNames', () => {
  const f = (key: string, title: string, objects: string[] = [], recommendation = '') => ({
    key,
    title,
    objects,
    recommendation,
  })
  test('by object, by key, or a distinctive name as a word of the title or advice', () => {
    expect(findingNames(f('pg_risky_settings:fsync', 'fsync is off'), 'fsync')).toBe(true)
    expect(findingNames(f('x:y', 'Spills', ['work_mem']), 'work_mem')).toBe(true)
    expect(findingNames(f('pg_temp_files:1', 'Sorts spill', [], 'Raise work_mem for it'), 'work_mem')).toBe(true)
    // a word only: maintenance_work_mem does not name work_mem, nor "ssl" a title about sslmode
    expect(findingNames(f('pg_temp_files:1', 'Raise maintenance_work_mem'), 'work_mem')).toBe(false)
    expect(findingNames(f('a:b', 'ssl is off for clients'), 'ssl')).toBe(false)
  })
})
