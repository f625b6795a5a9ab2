// Settings: API keys (their scopes chosen at creation, ingest and read by default; the full key shown
// once; the list with each key's scopes and creator; revoke after a confirmation that Esc cancels)
// and the agent setup (config.yaml and Helm values for this server, the database grants), each block with a copy button;
// under `dbm local`, whose agent runs in its own process, what a local user does instead (flags, not a file).
import { useState } from 'preact/hooks'
import { api } from '../api.ts'
import { Async, Code, CopyButton, Empty, ago, fmtTime, useApi, useConfirmation } from '../components/ui.tsx'
import type { Static } from '@sinclair/typebox'
import type { ApiKey as ApiKeySchema, ApiKeyScope, CreatedApiKey } from '../../shared/api/api-keys.ts'
import { useSession } from '../session.ts'
import { OwnersOnly, isOwner } from './members.tsx'
import { useLocalMode } from './auth.tsx'

type ApiKey = Static<typeof ApiKeySchema>

type CreatedKey = Static<typeof CreatedApiKey>

/** The key created last in this tab, kept in memory only (never stored): the agent setup fills it in. */
let lastCreated: CreatedKey | undefined

const KEY_PLACEHOLDER = 'dbm_ak_<key_id>_<secret>'

/** The scopes a key may hold, in order, with what each allows (the server's list: shared/api/api-keys.ts). */
const SCOPES: { scope: ApiKeyScope; label: string }[] = [
  { scope: 'ingest', label: "send the agent's telemetry" },
  { scope: 'read', label: 'read databases, telemetry, alerts and events' },
  { scope: 'admin', label: 'manage API keys and the webhook; register, reconfigure and delete databases' },
]

/** A key's scopes, as the lists show them. */
export function ScopeList({ scopes }: { scopes: readonly string[] }) {
  return <span data-scopes>{scopes.length > 0 ? scopes.join(', ') : 'none'}</span>
}

function CreateKeyForm({
  onCreated,
  defaultName = '',
  defaultScopes = ['ingest', 'read'],
}: {
  onCreated(key: CreatedKey): void
  defaultName?: string
  defaultScopes?: ApiKeyScope[]
}) {
  const [name, setName] = useState(defaultName)
  const [scopes, setScopes] = useState<ApiKeyScope[]>(defaultScopes)
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState('')
  const toggle = (scope: ApiKeyScope, on: boolean) =>
    setScopes((now) => SCOPES.map((s) => s.scope).filter((s) => (s === scope ? on : now.includes(s))))
  const submit = async (e: Event) => {
    e.preventDefault()
    if (scopes.length === 0) {
      setError('Choose at least one scope.')
      return
    }
    setBusy(true)
    setError('')
    try {
      const created = await api('POST', '/api-keys', { name, scopes })
      lastCreated = created
      setName(defaultName)
      setScopes(defaultScopes)
      onCreated(created)
    } catch (err) {
      setError((err as Error).message)
    } finally {
      setBusy(false)
    }
  }
  return (
    <form class="form-row" onSubmit={submit}>
      <div class="field">
        <label for="key-name">Key name</label>
        <input
          id="key-name"
          required
          maxLength={200}
          value={name}
          placeholder="production agent"
          onInput={(e) => setName((e.currentTarget as HTMLInputElement).value)}
        />
      </div>
      <fieldset class="scopes">
        <legend>Scopes</legend>
        {SCOPES.map(({ scope, label }) => (
          <label key={scope} class="check" title={label}>
            <input
              type="checkbox"
              name="scope"
              value={scope}
              checked={scopes.includes(scope)}
              onChange={(e) => toggle(scope, (e.currentTarget as HTMLInputElement).checked)}
            />{' '}
            <code>{scope}</code> <span class="muted small">{label}</span>
          </label>
        ))}
      </fieldset>
      <button type="submit" class="primary" disabled={busy}>
        {busy ? 'Creating…' : 'Create key'}
      </button>
      {error && (
        <p class="error" role="alert" style="flex-basis:100%">
          {error}
        </p>
      )}
    </form>
  )
}

/** The full key, once: with its copy button and the warning that it is not shown again. */
function NewKey({ created }: { created: CreatedKey }) {
  return (
    <div class="panel ok stack" role="status" aria-labelledby="new-key-title">
      <h2 id="new-key-title" style="margin-top:0">
        Key “{created.name}” created
      </h2>
      <p>
        <strong>Copy it now: it will not be shown again.</strong> dbm keeps only a hash of it. Put it in the agent's{' '}
        <code>config.yaml</code> (<code>api.key</code>) or send it as <code>X-API-Key</code>.
      </p>
      <div class="code">
        <pre>
          <code id="new-api-key">{created.key}</code>
        </pre>
        <CopyButton text={created.key} />
      </div>
      <p>
        <a href="#/settings/agent">Open the agent setup with this key</a>
      </p>
    </div>
  )
}

function KeyRow({ apiKey, onRevoked }: { apiKey: ApiKey; onRevoked(): void }) {
  const { confirming, open, close, busy, error, run, opener, cancelButton } = useConfirmation()
  const revoke = () =>
    run(async () => {
      await api('DELETE', `/api-keys/${encodeURIComponent(apiKey.id)}`)
      onRevoked()
    })
  return (
    <tr data-key={apiKey.name}>
      <td>{apiKey.name}</td>
      <td>
        <code>{apiKey.prefix}</code>
      </td>
      <td>
        <ScopeList scopes={apiKey.scopes} />
      </td>
      <td data-created-by>
        {apiKey.created_by ? (
          `${apiKey.created_by.name} (${apiKey.created_by.email})`
        ) : (
          <span
            class="muted"
            title="the creator was removed, or another key made it before keys recorded their creators"
          >
            unknown or removed
          </span>
        )}
      </td>
      <td title={fmtTime(apiKey.created_at)}>{ago(apiKey.created_at)}</td>
      <td title={fmtTime(apiKey.last_used_at)}>{ago(apiKey.last_used_at)}</td>
      <td>
        {apiKey.revoked_at ? (
          <span class="badge badge-muted" title={fmtTime(apiKey.revoked_at)}>
            revoked {ago(apiKey.revoked_at)}
          </span>
        ) : (
          <span class="badge badge-ok">active</span>
        )}
      </td>
      <td class="num">
        {!apiKey.revoked_at &&
          (confirming ? (
            <span class="row" style="justify-content:flex-end" role="group" aria-label={`Revoke ${apiKey.name}?`}>
              <span class="small">Agents using it are refused from their next request.</span>
              <button type="button" class="danger" disabled={busy} onClick={revoke}>
                {busy ? 'Revoking…' : 'Revoke now'}
              </button>
              <button type="button" ref={cancelButton} onClick={close} disabled={busy}>
                Cancel
              </button>
            </span>
          ) : (
            <button type="button" ref={opener} onClick={open} aria-label={`Revoke the key ${apiKey.name}`}>
              Revoke
            </button>
          ))}
        {error && (
          <span class="error" role="alert">
            {error}
          </span>
        )}
      </td>
    </tr>
  )
}

export function ApiKeys() {
  const keys = useApi('/api-keys?include_revoked=true')
  const [created, setCreated] = useState<CreatedKey>()
  return (
    <main>
      <div class="page-head">
        <h1>API keys</h1>
      </div>
      <p class="muted">
        An API key lets the agent send telemetry, and scripts call the API (<code>X-API-Key: dbm_ak_…</code>). A key
        acts for the whole organization, within its scopes: the agent needs only <code>ingest</code>; give{' '}
        <code>admin</code> only to what must manage keys, the webhook or databases. Removing or demoting an owner
        revokes the keys they created.
      </p>
      <div class="stack">
        <div class="panel">
          <CreateKeyForm
            onCreated={(key) => {
              setCreated(key)
              keys.reload()
            }}
          />
        </div>
        {created && <NewKey created={created} />}
        <Async loaded={keys}>
          {(list) =>
            list.length === 0 ? (
              <Empty title="No API keys yet">
                <p>Create one above for the agent: it is shown once, then only its prefix.</p>
              </Empty>
            ) : (
              <div class="table-wrap">
                <table>
                  <thead>
                    <tr>
                      <th scope="col">Name</th>
                      <th scope="col">Prefix</th>
                      <th scope="col">Scopes</th>
                      <th scope="col">Created by</th>
                      <th scope="col">Created</th>
                      <th scope="col">Last used</th>
                      <th scope="col">Status</th>
                      <th scope="col" class="num">
                        <span class="sr-only">Actions</span>
                      </th>
                    </tr>
                  </thead>
                  <tbody>
                    {[...list]
                      .sort(
                        (a, b) =>
                          Number(a.revoked_at !== null) - Number(b.revoked_at !== null) ||
                          b.created_at.localeCompare(a.created_at),
                      )
                      .map((k) => (
                        <KeyRow key={k.id} apiKey={k} onRevoked={keys.reload} />
                      ))}
                  </tbody>
                </table>
              </div>
            )
          }
        </Async>
      </div>
    </main>
  )
}

function agentConfig(endpoint: string, key: string): string {
  return `# config.yaml for dbm agent
api:
  endpoint: ${endpoint}
  key: ${key}
health:
  listen_addr: 127.0.0.1:8081   # optional: GET /healthz with each database's state (":8081" would
                                # bind every interface and show database names and errors to the network)
databases:
  - name: orders                # the name the dashboard shows; unique
    dsn: postgres://dbm_monitor:secret@db1.internal:5432/orders?sslmode=require
    poll_interval: 10s
    # explain_trusted_roles: [app]  # the role owning your tables and functions, if you trust its code to
                                    # run with the agent's rights while plans are sampled (docs/postgresql-setup.md)
    tags: { env: prod }
  - name: events
    dsn: clickhouse://dbm_monitor:secret@ch1.internal:8123/default
    poll_interval: 10s
`
}

function helmValues(endpoint: string, key: string): string {
  return `# values.yaml for deploy/helm/dbm-agent
apiKey: ${key}
apiEndpoint: ${endpoint}        # this server as seen from the cluster
databases:
  - name: orders
    dsn: postgres://dbm_monitor:secret@orders-db:5432/orders?sslmode=require
    pollInterval: 10s
  - name: events
    dsn: clickhouse://dbm_monitor:secret@events-ch:8123/default
    pollInterval: 10s
`
}

function helmCommand(endpoint: string, key: string): string {
  return `helm install dbm-agent deploy/helm/dbm-agent \\
  --set apiKey=${key} --set apiEndpoint=${endpoint} \\
  --set 'databases[0].name=orders' \\
  --set 'databases[0].dsn=postgres://dbm_monitor:secret@orders-db:5432/orders' \\
  --set 'databases[0].pollInterval=10s'`
}

const POSTGRES_GRANTS = `-- postgresql.conf: shared_preload_libraries = 'pg_stat_statements'   (restart needed)
CREATE EXTENSION pg_stat_statements;
CREATE ROLE dbm_monitor LOGIN PASSWORD '...';
GRANT pg_monitor TO dbm_monitor;
-- PostgreSQL 14+: read access to tables and sequences (it reads, never writes), so that EXPLAIN of
-- application statements works and sequences show how much of their range is used
GRANT pg_read_all_data TO dbm_monitor;
-- PostgreSQL 13 instead, per schema (public here), including objects created later:
GRANT SELECT ON ALL TABLES IN SCHEMA public TO dbm_monitor;
GRANT SELECT ON ALL SEQUENCES IN SCHEMA public TO dbm_monitor;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO dbm_monitor;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON SEQUENCES TO dbm_monitor;`

const CLICKHOUSE_USER = `CREATE USER dbm_monitor IDENTIFIED WITH sha256_password BY '...' SETTINGS readonly = 2;
GRANT SELECT ON system.* TO dbm_monitor;`

/** `dbm local`'s own setup: its agent runs in its process, so there is no config file to write nor key to make. */
function LocalSetup() {
  return (
    <main>
      <div class="page-head">
        <h1>Agent setup</h1>
      </div>
      <div class="stack" data-local-setup>
        <section class="panel" aria-labelledby="local-agent">
          <h2 id="local-agent" style="margin-top:0">
            This is dbm local: its agent is already running
          </h2>
          <p>
            <code>dbm local</code> runs the agent in its own process for the databases named on its command line: there
            is no <code>config.yaml</code> to write and no API key to create. At start it prints one line per database
            in its terminal: what it collects, and why anything is left out.
          </p>
          <h3>Watch another database</h3>
          <p>Stop dbm local (Ctrl-C) and start it again with every database to watch; the history is kept.</p>
          <Code text={'dbm local postgres://me@localhost:5432/app postgres://me@localhost:5432/billing'} />
          <h3>Plans of statements other roles run</h3>
          <p>
            Each database's owner is trusted for EXPLAIN. To have the plans of statements another role runs (the
            application's, say), trust it when you start dbm local:
          </p>
          <Code text={'dbm local --explain-trusted-role app postgres://me@localhost:5432/app'} />
          <p class="small muted">
            <code>dbm local --help</code> lists every flag. For a team, run <code>dbm serve</code> on a server and{' '}
            <code>dbm agent</code> next to the databases instead: this page then shows their setup.
          </p>
        </section>
        <section class="panel" aria-labelledby="local-grants">
          <h2 id="local-grants" style="margin-top:0">
            For everything to show
          </h2>
          <p>
            Statements need <code>pg_stat_statements</code> in each database; other sessions' statistics need a role
            with <code>pg_monitor</code> (or the superuser). With a role of its own, as below:
          </p>
          <Code text={POSTGRES_GRANTS} />
        </section>
      </div>
    </main>
  )
}

export function AgentSetup() {
  const [created, setCreated] = useState<CreatedKey | undefined>(lastCreated)
  const { me } = useSession()
  const local = useLocalMode()
  const endpoint = location.origin
  const key = created?.key ?? KEY_PLACEHOLDER
  if (local) return <LocalSetup />
  return (
    <main>
      <div class="page-head">
        <h1>Agent setup</h1>
      </div>
      <p class="muted">
        <code>dbm agent</code> runs next to your databases (the same <code>dbm</code> executable as the server) and
        sends their statistics to this server every 10 seconds. Point it at single nodes, never at a load balancer or a
        pooler.
      </p>
      <div class="stack">
        <section class="panel" aria-labelledby="step-key">
          <h2 id="step-key" style="margin-top:0">
            1. An API key
          </h2>
          {created ? (
            <p class="success" role="status">
              The examples below use the key “{created.name}” you just created. Copy it now: it is not shown again after
              you leave this tab.
            </p>
          ) : (
            <>
              <p>
                The examples show <code>{KEY_PLACEHOLDER}</code>: create a key here to have it filled in, or use one
                from <a href="#/settings/api-keys">API keys</a>.
              </p>
              {isOwner(me?.user.role) ? (
                <CreateKeyForm onCreated={setCreated} defaultName="agent" defaultScopes={['ingest']} />
              ) : (
                <OwnersOnly what="API keys" />
              )}
            </>
          )}
        </section>

        <section class="panel" aria-labelledby="step-db">
          <h2 id="step-db" style="margin-top:0">
            2. A monitoring user on each database
          </h2>
          <h3>PostgreSQL</h3>
          <Code text={POSTGRES_GRANTS} />
          <h3>ClickHouse</h3>
          <p class="small muted">
            Read-only, but allowed the per-query settings the agent sends (<code>readonly = 1</code> would refuse them);{' '}
            <code>system.query_log</code> must be enabled (the default).
          </p>
          <Code text={CLICKHOUSE_USER} />
        </section>

        <section class="panel" aria-labelledby="step-config">
          <h2 id="step-config" style="margin-top:0">
            3. The agent's config.yaml
          </h2>
          <Code text={agentConfig(endpoint, key)} />
          <p>Check it (connects once to each database and says what it will collect), then run it:</p>
          <Code text={'dbm agent --check --config config.yaml\ndbm agent --config config.yaml'} />
          <p class="small muted">
            Edits to the file apply while the agent runs. While this server is unreachable, the agent buffers its
            batches on disk for up to an hour.
          </p>
        </section>

        <section class="panel" aria-labelledby="step-helm">
          <h2 id="step-helm" style="margin-top:0">
            Or on Kubernetes, with Helm
          </h2>
          <Code text={helmCommand(endpoint, key)} />
          <p>Or with a values file:</p>
          <Code text={helmValues(endpoint, key)} />
          <Code text="helm install dbm-agent deploy/helm/dbm-agent -f values.yaml" />
        </section>

        <p>
          Once the agent runs, your databases appear under <a href="#/databases">Databases</a> within a few seconds.
        </p>
      </div>
    </main>
  )
}
