// The version `dbm version` prints, read from package.json at build time.
import pkg from '../package.json' with { type: 'json' }

export const VERSION: string = pkg.version
