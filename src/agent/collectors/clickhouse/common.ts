// Helpers shared by the ClickHouse collectors: one way to run a SELECT with bound parameters and read
// its rows, and the test for a system table this server does not have.
import { ClickHouseError } from '@clickhouse/client'
import type { ClickHouseContext } from '../types.ts'

export const MAX_TEXT = 10_000

/** Runs a SELECT with `{name:Type}` placeholders bound from `params`, returning its rows. */
export async function select<T>(ctx: ClickHouseContext, query: string, params?: Record<string, unknown>): Promise<T[]> {
  const result = await ctx.client.query({ query, format: 'JSONEachRow', query_params: params })
  return result.json<T>()
}

/** A system table (or database) the server does not have: disabled log tables, older versions. */
export function isUnknownTable(e: unknown): boolean {
  return e instanceof ClickHouseError && (e.type === 'UNKNOWN_TABLE' || e.code === '60')
}

/** Rows of a query on an optional system table; undefined when the table does not exist. */
export async function selectOptional<T>(
  ctx: ClickHouseContext,
  query: string,
  params?: Record<string, unknown>,
): Promise<T[] | undefined> {
  try {
    return await select<T>(ctx, query, params)
  } catch (e) {
    if (isUnknownTable(e)) return undefined
    throw e
  }
}
