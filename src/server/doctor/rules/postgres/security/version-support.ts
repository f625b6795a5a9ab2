// The offline version advisor: the server's PostgreSQL version (the batch's engine_version) against the
// release table shipped in the binary (src/server/doctor/pg-releases.ts, refreshed at release time by
// scripts/pg-releases.ts; nothing is fetched at run time). A minor release behind: how many, and how many
// of them fixed security issues (a warning when any did, else info); a major past its end of life: a
// warning (no more fixes, security ones included), info within `eol_notice_days` of it. Every finding
// says the table's date, since releases after it are unknown here. server_version_changed judges a
// change of version; this rule the version itself. Like the other security advisors it judges only a
// database whose agent runs the `security` collector (disabled_collectors: [security] turns them all off).
import { PG_MAJORS, PG_RELEASES, PG_RELEASES_AS_OF, type PgMajor } from '../../../pg-releases.ts'
import { commentText } from '../../../sql-text.ts'
import type { FindingDraft, Rule } from '../../../types.ts'

const defaults = {
  /** An end of life within this many days is an info finding. */
  eol_notice_days: 180,
}

const DAY = 86_400_000

/** The major (`17`, `9.6`) and minor of a server_version text (`17.2 (Debian ...)`, `9.6.24`); null for a development build (`19devel`, `18beta2`). */
export function parsePgVersion(version: string): { major: string; minor: number } | null {
  const m = /^\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?(\S*)/.exec(version)
  if (!m || (m[4] ?? '') !== '') return null
  const first = Number(m[1])
  if (first >= 10) return m[2] === undefined ? null : { major: String(first), minor: Number(m[2]) }
  return m[2] === undefined || m[3] === undefined ? null : { major: `${first}.${m[2]}`, minor: Number(m[3]) }
}

export interface VersionStanding {
  major: string
  minor: number
  /** The major's row of the table; undefined when the table does not know it (newer than the table). */
  line?: PgMajor
  /** Newer minors of the same major in the table, oldest first. */
  newer: { version: string; date: string; security: boolean }[]
}

/** Where `version` stands in the release table. */
export function versionStanding(version: string): VersionStanding | null {
  const v = parsePgVersion(version)
  if (!v) return null
  const newer: VersionStanding['newer'] = []
  for (const r of PG_RELEASES) {
    for (const rv of r.versions) {
      const p = parsePgVersion(rv)
      if (p && p.major === v.major && p.minor > v.minor) newer.push({ version: rv, date: r.date, security: r.security })
    }
  }
  return { ...v, line: PG_MAJORS.find((m) => m.major === v.major), newer }
}

const asOfText = `the release table of this dbm is of ${PG_RELEASES_AS_OF}: later releases are unknown to it`

export const versionSupport: Rule<typeof defaults> = {
  id: 'pg_version_support',
  engine: 'postgres',
  category: 'security',
  summary:
    'A minor release behind (how many, and how many fixed security issues) and a major past or near its end of life, from a release table shipped in the binary (offline; the finding gives its date).',
  collectors: ['security'],
  thresholds: defaults,
  async check(ctx) {
    const t = ctx.thresholds(versionSupport)
    if (!(await ctx.security())) return []
    const version = ctx.db.engine_version
    const standing = version ? versionStanding(version) : null
    if (!version || !standing) return []
    const findings: FindingDraft[] = []
    const shown = commentText(version, 100)
    const { newer, line } = standing
    if (newer.length > 0) {
      const latest = newer[newer.length - 1]!
      const security = newer.filter((n) => n.security)
      findings.push({
        severity: security.length > 0 ? 'warning' : 'info',
        object: `PostgreSQL ${standing.major}.${standing.minor}`,
        title: `PostgreSQL ${standing.major}.${standing.minor} is ${newer.length} minor release${newer.length === 1 ? '' : 's'} behind ${latest.version}${security.length > 0 ? `, ${security.length} of them with security fixes` : ''}`,
        detail:
          `The server runs ${shown}; ${latest.version} came out on ${latest.date}. ` +
          (security.length > 0
            ? `${security.map((n) => `${n.version} (${n.date})`).join(', ')} fixed security issues that this server still has. `
            : 'None of the newer minor releases fixed a security issue, but each fixes bugs (some of them data corruption). ') +
          `Minor releases of one major share the data format: updating is installing the new binaries and restarting, no dump and no pg_upgrade. (${asOfText}.)`,
        recommendation: `Update to ${latest.version} (your distribution's or image's package), reading the release notes of each minor release skipped for steps it asks for (some ask to REINDEX some indexes), then restart the server; a standby first, then the primary.`,
        how_to_investigate: [
          'SELECT version();',
          `-- ${commentText(`release notes: https://www.postgresql.org/docs/release/${latest.version}/ and the security advisories: https://www.postgresql.org/support/security/`)}`,
        ],
        how_to_fix: [
          `-- ${commentText(`install PostgreSQL ${latest.version} and restart the server (standbys first)`)}`,
          "SELECT current_setting('server_version');   -- after the restart",
        ],
        metrics: {
          version: shown,
          latest: latest.version,
          minors_behind: newer.length,
          security_releases_behind: security.length,
          table_as_of: PG_RELEASES_AS_OF,
        },
      })
    }
    if (line) {
      const eol = Date.parse(`${line.eol}T00:00:00Z`)
      const past = eol <= ctx.now
      if (past || eol - ctx.now <= t.eol_notice_days * DAY) {
        const supported = PG_MAJORS.filter((m) => Date.parse(`${m.eol}T00:00:00Z`) > ctx.now).map((m) => m.major)
        findings.push({
          severity: past ? 'warning' : 'info',
          object: `PostgreSQL ${line.major}`,
          title: past
            ? `PostgreSQL ${line.major} reached its end of life on ${line.eol}`
            : `PostgreSQL ${line.major} reaches its end of life on ${line.eol}`,
          detail:
            `The server runs ${shown}. PostgreSQL supports a major version for five years; ${line.major} ${past ? 'ended' : 'ends'} on ${line.eol}${past ? ': no release fixes its bugs or security issues any more' : `, in ${Math.ceil((eol - ctx.now) / DAY)} days: no fix comes after it`}. ` +
            `Supported majors${supported.length ? `: ${supported.join(', ')}` : ' are newer than the table'} (${asOfText}).`,
          recommendation: `Plan the upgrade to a supported major (pg_upgrade, or logical replication to a new server for little downtime), reading the release notes' migration sections of every major in between.`,
          how_to_investigate: [
            'SELECT version();',
            'SELECT name, installed_version FROM pg_available_extensions WHERE installed_version IS NOT NULL;   -- extensions to have on the new major',
          ],
          how_to_fix: [
            `-- ${commentText(`upgrade to PostgreSQL ${supported[supported.length - 1] ?? 'a supported major'} with pg_upgrade --check first, or through logical replication`)}`,
          ],
          metrics: { version: shown, major: line.major, eol: line.eol, table_as_of: PG_RELEASES_AS_OF },
        })
      }
    }
    return findings
  },
}
