// The security and configuration advisors for PostgreSQL (issue 32): each reads the `security`
// collector's snapshot (the version advisor reads the batch's server version and the release table) and
// names its object, cause, fix and how to investigate, every monitored name quoted through sql-text.ts.
import type { Rule } from '../../../types.ts'
import { dataChecksums } from './data-checksums.ts'
import { definerSearchPath } from './definer-search-path.ts'
import { hbaMethods } from './hba-methods.ts'
import { md5Passwords } from './md5-passwords.ts'
import { passwordExpiry } from './password-expiry.ts'
import { publicCreate } from './public-create.ts'
import { sslOff } from './ssl-off.ts'
import { superusers } from './superusers.ts'
import { versionSupport } from './version-support.ts'

export const securityRules: Rule[] = [
  versionSupport,
  superusers,
  definerSearchPath,
  hbaMethods,
  sslOff,
  publicCreate,
  md5Passwords,
  passwordExpiry,
  dataChecksums,
]
