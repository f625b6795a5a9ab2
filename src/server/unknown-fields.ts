// Forward compatibility of the ingest wire contract: a newer agent may send fields this server does not
// know, at any level of a batch. They are removed before the store sees the batch (sections such as the
// activity snapshot are stored whole, so they would otherwise be kept and served), and their paths are
// handed back so the route can say what it ignored.
import { Kind, type TSchema } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'

type Json = Record<string, unknown>

const isPlainObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value)

/** Each object schema's declared properties as a Map (a plain object would also answer `constructor`). */
const declared = new WeakMap<TSchema, Map<string, TSchema>>()

function propertiesOf(schema: TSchema): Map<string, TSchema> {
  let properties = declared.get(schema)
  if (!properties) declared.set(schema, (properties = new Map(Object.entries(schema.properties as Record<string, TSchema>))))
  return properties
}

/** The member of a union that describes `value` (an object or an array; other values hold no fields). */
function unionMember(schema: TSchema, value: object): TSchema | undefined {
  const wanted = Array.isArray(value) ? 'Array' : 'Object'
  const candidates = (schema.anyOf as TSchema[]).filter((member) => member[Kind] === wanted)
  if (candidates.length <= 1) return candidates[0]
  return candidates.find((member) => Value.Check(member, value))
}

/**
 * Deletes from `value`, in place, every property its schema does not declare, at every depth, and
 * returns the paths of what it deleted, each once: `field`, `database.field`, `query_stats[].field`,
 * `replication.replicas[].field`. Values the schema leaves open (`Unknown`, such as plan_json) and the
 * values of records (counter maps, tags) are kept as they are. Call it on a value that passed validation.
 */
export function stripUnknownFields(schema: TSchema, value: unknown, path = '', found = new Set<string>()): Set<string> {
  // Only objects and arrays hold fields; the walk visits nothing else, and builds a path only for them.
  if (typeof value !== 'object' || value === null) return found
  switch (schema[Kind]) {
    case 'Object': {
      if (Array.isArray(value)) break
      const properties = propertiesOf(schema)
      for (const key of Object.keys(value)) {
        const property = properties.get(key)
        const child = (value as Json)[key]
        if (!property) {
          delete (value as Json)[key]
          found.add(path ? `${path}.${key}` : key)
        } else if (typeof child === 'object' && child !== null) {
          stripUnknownFields(property, child, path ? `${path}.${key}` : key, found)
        }
      }
      break
    }
    case 'Array': {
      if (!Array.isArray(value)) break
      const itemPath = `${path}[]`
      for (const item of value) stripUnknownFields(schema.items as TSchema, item, itemPath, found)
      break
    }
    case 'Union': {
      const member = unionMember(schema, value)
      if (member) stripUnknownFields(member, value, path, found)
      break
    }
    case 'Record': {
      if (!isPlainObject(value)) break
      const [valueSchema] = Object.values(schema.patternProperties as Record<string, TSchema>)
      if (valueSchema) for (const child of Object.values(value)) stripUnknownFields(valueSchema, child, `${path}.*`, found)
      break
    }
  }
  return found
}
