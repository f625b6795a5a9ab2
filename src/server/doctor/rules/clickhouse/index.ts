// The ClickHouse rules, one per file.
import type { Rule } from '../../types.ts'

export const clickhouseRules: Rule[] = [
]
