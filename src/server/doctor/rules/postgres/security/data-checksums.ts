// Data checksums off (`data_checksums`, fixed when the cluster was made: initdb's default before
// PostgreSQL 18): a page corrupted by the disk, the controller or the kernel is read as if it were good,
// so the corruption spreads to replicas and backups unnoticed. With checksums PostgreSQL reports it on
// read (pg_stat_database.checksum_failures). Info: it is a choice made at initdb, turned on offline with
// pg_checksums (PostgreSQL 12+) or through a replica built with it.
import type { Rule } from '../../../types.ts'

const defaults = {}

export const dataChecksums: Rule<typeof defaults> = {
  id: 'pg_data_checksums',
  engine: 'postgres',
  category: 'configuration',
  summary:
    'Data checksums off (data_checksums): corrupted pages are read as good; turned on offline with pg_checksums.',
  collectors: ['security'],
  thresholds: defaults,
  async check(ctx) {
    const found = await ctx.security()
    if (found?.status.data_checksums?.trim().toLowerCase() !== 'off') return []
    return [
      {
        severity: 'info',
        object: 'data_checksums',
        title: 'Data checksums are off: corrupted pages go unnoticed',
        detail:
          'data_checksums is off: PostgreSQL writes no checksum on its data pages, so a page damaged by the disk, the controller, the filesystem or the kernel is read as good, ' +
          'and the damage reaches query results, replicas and backups before anyone sees it. With checksums a damaged page fails its read and pg_stat_database counts it (checksum_failures). initdb turns them on by default from PostgreSQL 18 (--data-checksums before).',
        recommendation:
          'Turn checksums on: with the server stopped, pg_checksums --enable on the data directory (it rewrites every file: minutes per tens of GB; on a primary with standbys, do each standby first or rebuild them), or build a new replica with initdb --data-checksums and switch over to it. The cost at run time is a few percent of CPU.',
        how_to_investigate: ['SHOW data_checksums;', 'SHOW data_directory;   -- the directory pg_checksums needs'],
        how_to_fix: [
          '-- stop the server cleanly, then on the host as its operating-system user: pg_checksums --enable --progress -D <data directory>; then start it and check:',
          'SHOW data_checksums;',
        ],
        metrics: { data_checksums: found.status.data_checksums },
        as_of: found.ts,
      },
    ]
  },
}
