// Forward compatibility of the ingest wire contract: a newer agent may send fields this server does not
// know, at any level of a batch. They are left out before the store sees the batch (sections such as the
// activity snapshot are stored whole, so they would otherwise be kept and served), and the route is told
// what it ignored. The cost is bounded whatever the batch holds: an object with unknown keys is rebuilt
// from its declared properties (no `delete`), unknown keys are told apart by their path shape
// (`query_stats[].x` once, however many rows carry it), each key costs one Set lookup, and a batch with
// more distinct unknown paths than the limit is refused as soon as the walk meets one too many.
import { Kind, type TSchema } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import { badRequest } from './http-error.ts'

type Json = Record<string, unknown>

export interface UnknownFieldLimits {
  /** Most distinct unknown paths a batch may carry; one more and it is refused (400). */
  distinctPaths: number
  /** Paths named in the result; the others are only counted. */
  named: number
}

export interface StrippedBatch<T> {
  /** The batch without its unknown fields (objects that had some are new objects). */
  value: T
  /** The first distinct unknown paths met, at most `named` of them: `x`, `database.x`, `query_stats[].x`. */
  paths: string[]
  /** Distinct unknown paths met beyond those. */
  more: number
}

/** An object schema's declared properties: a Map for lookups, arrays for the walk over them. */
interface Declared {
  /** Each declared property's schema, or null when its values hold no fields the walk must visit. */
  walked: Map<string, TSchema | null>
  keys: string[]
}

/** Whether a value of `schema` may hold declared fields: what the walk has to visit. */
function mayHoldFields(schema: TSchema): boolean {
  switch (schema[Kind]) {
    case 'Object':
      return true
    case 'Array':
      return mayHoldFields(schema.items as TSchema)
    case 'Union':
      return (schema.anyOf as TSchema[]).some(mayHoldFields)
    case 'Record':
      return Object.values(schema.patternProperties as Record<string, TSchema>).some(mayHoldFields)
    default:
      return false
  }
}

const declared = new WeakMap<TSchema, Declared>()

function propertiesOf(schema: TSchema): Declared {
  let properties = declared.get(schema)
  if (!properties) {
    const entries = Object.entries(schema.properties as Record<string, TSchema>)
    properties = {
      walked: new Map(entries.map(([key, property]) => [key, mayHoldFields(property) ? property : null])),
      keys: entries.map(([key]) => key),
    }
    declared.set(schema, properties)
  }
  return properties
}

/** The member of a union that describes `value` (an object or an array; other values hold no fields). */
function unionMember(schema: TSchema, value: object): TSchema | undefined {
  const wanted = Array.isArray(value) ? 'Array' : 'Object'
  const candidates = (schema.anyOf as TSchema[]).filter((member) => member[Kind] === wanted)
  if (candidates.length <= 1) return candidates[0]
  return candidates.find((member) => Value.Check(member, value))
}

const holdsFields = (value: unknown): value is object => typeof value === 'object' && value !== null

/**
 * One path shape of the batch (`tables[].delta`): every object met at that shape shares it, with the
 * unknown keys already seen there. Shapes exist only for declared properties, array items and record
 * values, so their number is bounded by the schema, not by the batch.
 */
class Shape {
  private readonly children = new Map<string, Shape>()
  private unknown: Set<string> | undefined

  constructor(readonly path: string) {}

  /** The shape below this one: `key` of an object, `[]` (items) or `*` (record values). */
  child(step: string): Shape {
    let shape = this.children.get(step)
    if (!shape) {
      const path = step === '[]' ? `${this.path}[]` : this.path ? `${this.path}.${step}` : step
      this.children.set(step, (shape = new Shape(path)))
    }
    return shape
  }

  /** Records `key` as unknown here; true the first time. */
  firstUnknown(key: string): boolean {
    const seen = (this.unknown ??= new Set())
    if (seen.has(key)) return false
    seen.add(key)
    return true
  }
}

class Stripper {
  readonly paths: string[] = []
  distinct = 0

  constructor(private readonly limits: UnknownFieldLimits) {}

  private unknownKey(shape: Shape, key: string): void {
    if (!shape.firstUnknown(key)) return
    if (this.distinct >= this.limits.distinctPaths)
      throw badRequest(`too many unknown fields (more than ${this.limits.distinctPaths})`)
    this.distinct++
    if (this.paths.length < this.limits.named) this.paths.push(shape.path ? `${shape.path}.${key}` : key)
  }

  /** `value` without unknown fields: the same value when it had none at its level, else a rebuilt object. */
  walk(schema: TSchema, value: object, shape: Shape): object {
    switch (schema[Kind]) {
      case 'Object': {
        if (Array.isArray(value)) return value
        const { walked, keys } = propertiesOf(schema)
        const source = value as Json
        let hasUnknown = false
        for (const key in source) {
          const property = walked.get(key)
          if (property === undefined) {
            hasUnknown = true
            this.unknownKey(shape, key)
          } else if (property !== null) {
            const child = source[key]
            if (!holdsFields(child)) continue
            const kept = this.walk(property, child, shape.child(key))
            if (kept !== child) source[key] = kept
          }
        }
        if (!hasUnknown) return source
        const rebuilt: Json = {}
        for (const key of keys) if (Object.hasOwn(source, key)) rebuilt[key] = source[key]
        return rebuilt
      }
      case 'Array': {
        if (!Array.isArray(value)) return value
        const items = schema.items as TSchema
        const itemShape = shape.child('[]')
        for (let i = 0; i < value.length; i++) {
          const item: unknown = value[i]
          if (!holdsFields(item)) continue
          const kept = this.walk(items, item, itemShape)
          if (kept !== item) value[i] = kept
        }
        return value
      }
      case 'Union': {
        const member = unionMember(schema, value)
        return member ? this.walk(member, value, shape) : value
      }
      case 'Record': {
        if (Array.isArray(value)) return value
        const [valueSchema] = Object.values(schema.patternProperties as Record<string, TSchema>)
        if (!valueSchema) return value
        const valueShape = shape.child('*')
        const record = value as Json
        for (const key in record) {
          const child = record[key]
          if (!holdsFields(child)) continue
          const kept = this.walk(valueSchema, child, valueShape)
          if (kept !== child) record[key] = kept
        }
        return value
      }
      default:
        return value
    }
  }
}

/**
 * The batch without the properties its schema does not declare, at every depth, and the distinct paths
 * of what was left out. Values the schema leaves open (`Unknown`, such as plan_json) and the values of
 * records (counter maps, tags) are kept as they are. Call it on a value that passed validation; throws
 * a 400 when the batch holds more distinct unknown paths than `limits.distinctPaths`.
 */
export function stripUnknownFields<T extends object>(
  schema: TSchema,
  value: T,
  limits: UnknownFieldLimits,
): StrippedBatch<T> {
  const stripper = new Stripper(limits)
  const stripped = stripper.walk(schema, value, new Shape('')) as T
  return { value: stripped, paths: stripper.paths, more: stripper.distinct - stripper.paths.length }
}
