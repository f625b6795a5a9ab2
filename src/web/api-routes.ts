// The dashboard's calls typed by the server's routes: a path as the pages write it
// (`/databases/${id}/queries?limit=25`, under /api/v1) is looked up in the route tree of the exported
// `App` type (Elysia's `~Routes`, the same tree Eden Treaty reads), so that a path no route serves is a
// compile error and the answer's type is the route's response schema (src/shared/api), not a
// hand-written interface. Types only: nothing here reaches the bundle, and no server code is imported
// at run time. (Eden Treaty itself was evaluated for issue 27: it type-checks on App, but its calls are
// chains, `api.databases({ id }).queries.get({ query })`, where the pages and useApi key on a path
// string; these types give the same checks on the calls as they are.)
import type { App } from '../server/app.ts'

type Routes = App['~Routes']

/** The methods the dashboard calls. */
export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'

/** The path without its query string. */
type PathOnly<P extends string> = P extends `${infer Path}?${string}` ? Path : P

/** `/databases/x/queries` as ['databases', 'x', 'queries']. */
type Segments<P extends string> = P extends `/${infer Rest}`
  ? Segments<Rest>
  : P extends `${infer Head}/${infer Rest}`
    ? [Head, ...Segments<Rest>]
    : P extends ''
      ? []
      : [P]

/** The `:param` key of a level of the tree, if it has one. */
type ParamKey<T> = Extract<keyof T, `:${string}`>

/** The tree's node at `segments`: a literal segment first, else the level's `:param`. */
type Walk<T, S extends string[]> = S extends [infer H extends string, ...infer R extends string[]]
  ? H extends keyof T
    ? Walk<T[H], R>
    : [ParamKey<T>] extends [never]
      ? never
      : Walk<T[ParamKey<T>], R>
  : T

/** The route of `method path` (its body, query and response), or never when no route serves it. */
export type RouteOf<M extends Method, P extends string> =
  Walk<Routes['api']['v1'], Segments<PathOnly<P>>> extends infer N
    ? [N] extends [never]
      ? never
      : Lowercase<M> extends keyof N
        ? N[Lowercase<M>]
        : never
    : never

/** The answer of a successful call: the route's 200, 201 or 202 schema; nothing for a 204. */
type Success<R> = R extends { 200: infer A }
  ? A
  : R extends { 201: infer A }
    ? A
    : R extends { 202: infer A }
      ? A
      : R extends { 204: unknown }
        ? undefined
        : unknown

/** What `method path` answers when it succeeds. */
export type Answer<M extends Method, P extends string> =
  RouteOf<M, P> extends { response: infer R } ? Success<R> : never

/** `path` itself when a route serves `method path`; otherwise a type no string has, naming the problem. */
export type Served<M extends Method, P extends string> = [RouteOf<M, P>] extends [never]
  ? `no ${M} route serves ${P}`
  : P

/** The answer of GET `path`. */
export type GetAnswer<P extends string> = Answer<'GET', P>
