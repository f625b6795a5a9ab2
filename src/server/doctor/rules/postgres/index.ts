// The PostgreSQL rules, one per file.
import type { Rule } from '../../types.ts'
import { cacheHitRatio } from './cache-hit-ratio.ts'

export const postgresRules: Rule[] = [
  cacheHitRatio,
]
