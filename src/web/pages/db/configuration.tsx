// Configuration: the monitored server's settings (/configuration), PgHero's settings page with
// pganalyze's detail: each setting's value as SHOW prints it, its built-in default in the same form,
// where it is set (file:line, ALTER SYSTEM, ALTER DATABASE / ROLE, command line), what a change needs
// (restart, reload, superuser, session), whether it awaits a restart, and the doctor's word on it (the
// why of a risky setting, the current findings naming it, linked). Shows the settings changed from
// their defaults unless ?all=1; ?q= searches names and descriptions. Every text from the server is
// shown through DbText.
import { useEffect, useState } from 'preact/hooks'
import { type Column, DataTable } from '../../components/data-table.tsx'
import { DbText } from '../../components/invisible.tsx'
import { Async, Empty, fmtNum, fmtTime, useApi } from '../../components/ui.tsx'
import { Card, Field, NoDataYet, SeverityBadge, apiPath, issuesHref } from './common.tsx'
import type { Database, PageProps } from './types.ts'
import type { Static } from '@sinclair/typebox'
import type { Configuration as ConfigurationSchema } from '../../../shared/api/configuration.ts'

type Configuration = Static<typeof ConfigurationSchema>
type Setting = Configuration['settings'][number]

const muted = (text: string) => <span class="muted">{text}</span>

function columns(db: Database, details: boolean): Column<Setting>[] {
  const all: Column<Setting>[] = [
    {
      key: 'name',
      label: 'Setting',
      render: (s) => (
        <div class="setting-name">
          <span class="mono">
            <DbText text={s.name} />
          </span>
          {s.description ? (
            <div class="muted small">
              <DbText text={s.description} />
            </div>
          ) : null}
        </div>
      ),
      sort: (s) => s.name,
    },
    {
      key: 'value',
      label: 'Value',
      render: (s) => (
        <div>
          <span class="mono">{s.value === '' ? muted('(empty)') : <DbText text={s.value} />}</span>
          {s.pending_restart ? (
            <div>
              <span class="badge badge-warning">pending restart</span>
            </div>
          ) : null}
        </div>
      ),
      sort: (s) => s.value,
    },
  ]
  if (!details) return [...all, adviceColumn(db)]
  return [
    ...all,
    {
      key: 'default',
      label: 'Default',
      render: (s) =>
        s.default === null ? (
          muted('—')
        ) : s.default === '' ? (
          muted('(empty)')
        ) : (
          <span class="mono">
            <DbText text={s.default} />
          </span>
        ),
      sort: (s) => s.default,
    },
    {
      key: 'source',
      label: 'Set by',
      render: (s) =>
        s.source_label === null ? (
          muted('—')
        ) : s.source === 'default' ? (
          muted('default')
        ) : (
          <DbText text={s.source_label} />
        ),
      sort: (s) => s.source_label,
    },
    { key: 'applies', label: 'A change needs', render: (s) => s.applies ?? muted('—'), sort: (s) => s.applies },
    adviceColumn(db),
  ]
}

function adviceColumn(db: Database): Column<Setting> {
  return {
    key: 'advice',
    label: 'Advice',
    render: (s) =>
      s.advice === null && s.findings.length === 0 ? (
        ''
      ) : (
        <div class="setting-advice small">
          {s.findings.map((f) => (
            <div key={f.key}>
              <SeverityBadge severity={f.severity} />{' '}
              <a href={issuesHref(db, f.key)}>
                <DbText text={f.title} />
              </a>
            </div>
          ))}
          {s.advice ? <div class="muted">{s.advice}</div> : null}
        </div>
      ),
    sort: (s) => s.findings.length * 2 + (s.advice ? 1 : 0),
  }
}

/** The settings of the server, changed ones first shown; search and the all/changed switch in the URL. */
export function ConfigurationPage({ db, query, setQuery }: PageProps) {
  const found = useApi(db.last_seen_at ? apiPath(db, '/configuration') : null)
  const all = query.get('all') === '1'
  const q = query.get('q') ?? ''
  const [text, setText] = useState(q)
  useEffect(() => setText(q), [q])
  if (!db.last_seen_at) return <NoDataYet db={db} />
  const needle = text.trim().toLowerCase()
  return (
    <section>
      <Async loaded={found}>
        {(c) => {
          if (c.total === 0)
            return (
              <Empty title="No settings yet">
                <p>
                  The agent sends the server's settings with its first batch and whenever they change; an agent older
                  than this server sends none.
                </p>
              </Empty>
            )
          const rows = c.settings.filter(
            (s) =>
              (all || s.changed) &&
              (needle === '' ||
                s.name.toLowerCase().includes(needle) ||
                (s.description ?? '').toLowerCase().includes(needle)),
          )
          const advised = c.settings.filter((s) => s.findings.length > 0).length
          return (
            <>
              <div class="cards">
                <Card
                  label="Settings"
                  value={fmtNum(c.total)}
                  sub={c.engine === 'clickhouse' ? 'changed from their defaults' : 'of the server'}
                />
                {c.engine === 'postgres' ? <Card label="Changed from default" value={fmtNum(c.changed)} /> : null}
                <Card
                  label="Pending restart"
                  value={fmtNum(c.pending_restart)}
                  tone={c.pending_restart > 0 ? 'warning' : undefined}
                />
                <Card
                  label="With findings"
                  value={fmtNum(advised)}
                  tone={advised > 0 ? 'warning' : undefined}
                  href={advised > 0 ? issuesHref(db) : undefined}
                />
              </div>
              {!c.details ? (
                <p class="muted small">
                  The agent sends values only (it is older than this server): upgrade it for each setting's source,
                  default and context.
                </p>
              ) : null}
              <div class="toolbar">
                {c.engine === 'postgres' ? (
                  <label class="check">
                    <input
                      type="checkbox"
                      checked={!all}
                      onChange={(e) =>
                        setQuery({ all: (e.target as HTMLInputElement).checked ? undefined : '1' }, { replace: true })
                      }
                    />{' '}
                    Only settings changed from their default
                  </label>
                ) : null}
                <div class="filter-field">
                  <Field label="Search settings">
                    {(id) => (
                      <input
                        id={id}
                        type="search"
                        value={text}
                        placeholder="e.g. work_mem"
                        autoComplete="off"
                        spellcheck={false}
                        onInput={(e) => setText((e.target as HTMLInputElement).value)}
                        onChange={(e) =>
                          setQuery({ q: (e.target as HTMLInputElement).value.trim() || undefined }, { replace: true })
                        }
                      />
                    )}
                  </Field>
                </div>
              </div>
              {rows.length === 0 ? (
                <p class="muted">
                  No setting matches{all || c.engine === 'clickhouse' ? '' : ' among the changed ones'}.
                </p>
              ) : (
                <DataTable
                  caption="Server settings"
                  columns={columns(db, c.details)}
                  rows={rows}
                  rowKey={(s) => s.name}
                  initialSort={{ key: 'name', dir: 'asc' }}
                  compact
                />
              )}
              <p class="muted small">
                {fmtNum(rows.length)} of {fmtNum(c.total)} shown.
                {c.collected_at
                  ? ` As the agent read them at ${fmtTime(c.collected_at)} (it sends them again when they change).`
                  : ''}
                {c.findings_unavailable ? ' The doctor was busy: findings are left out this time.' : ''}
              </p>
            </>
          )
        }}
      </Async>
    </section>
  )
}
