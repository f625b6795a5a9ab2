// The agent's collectors by engine and name, as postgres_exporter keeps them: each collector module
// registers its implementation once (registerCollector), under a name that src/shared/collectors.ts's
// table must hold, and takes the table's facts about it (lowest server version, server-side switch)
// from there rather than stating them again. The engine's list (collectorsOf) is in the table's order
// and fails loudly when a table entry has no implementation, so a new collector is one module plus one
// line of the table, with no switch on names anywhere.
import { type CollectorName, type EngineName, collectorNames } from '../../shared/collectors.ts'
import type { Collector } from './types.ts'

/** What a collector module writes; the table's facts are added by the registry. */
export type CollectorDefinition<Ctx> = Omit<Collector<Ctx>, 'minVersion' | 'serverSwitch'>

const registered = new Map<string, Collector<never>>()
const keyOf = (engine: EngineName, name: string) => `${engine}:${name}`

/** The table's entry of `engine`'s collector `name`; throws for a name the table does not hold. */
export function tableEntry(engine: EngineName, name: string): CollectorName {
  const entry = collectorNames.find((c) => c.engine === engine && c.name === name)
  if (!entry) throw new Error(`collector ${engine}/${name} is not in the table of src/shared/collectors.ts`)
  return entry
}

/** Registers a collector's implementation once, and answers it with the table's facts added. */
export function registerCollector<Ctx>(definition: CollectorDefinition<Ctx>): Collector<Ctx> {
  const { minVersion, serverSwitch } = tableEntry(definition.engine, definition.name)
  const key = keyOf(definition.engine, definition.name)
  if (registered.has(key)) throw new Error(`collector ${key.replace(':', '/')} is registered twice`)
  const collector: Collector<Ctx> = {
    ...definition,
    ...(minVersion === undefined ? {} : { minVersion }),
    ...(serverSwitch === undefined ? {} : { serverSwitch }),
  }
  registered.set(key, collector as Collector<never>)
  return collector
}

/** Every collector of `engine`, in the table's order; throws when one of the table's has not registered. */
export function collectorsOf<Ctx>(engine: EngineName): Collector<Ctx>[] {
  return collectorNames
    .filter((c) => c.engine === engine)
    .map((c) => {
      const collector = registered.get(keyOf(engine, c.name))
      if (!collector) throw new Error(`collector ${engine}/${c.name} of the table has no implementation registered`)
      return collector as unknown as Collector<Ctx>
    })
}
