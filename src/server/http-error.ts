// The one error type of the API: a status and a message, turned into {"error": message} by the
// app's onError. Anything else thrown is logged with its cause and answered with a plain 500.

export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message)
    this.name = 'HttpError'
  }
}

export const badRequest = (message: string) => new HttpError(400, message)
export const unauthorized = (message: string) => new HttpError(401, message)
export const forbidden = (message: string) => new HttpError(403, message)
export const notFound = (what: string) => new HttpError(404, `${what} not found`)
export const conflict = (message: string) => new HttpError(409, message)

/** A 429 with Retry-After; `why` (without the wait, which is added) when the answer is more than a rate. */
export function tooManyRequests(retryAfterMs: number, why = 'too many requests'): HttpError {
  const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000))
  return new HttpError(429, `${why}; try again in ${seconds} s`, { 'retry-after': String(seconds) })
}
