// A real HTTP receiver for webhook deliveries (Bun.serve on a loopback port): keeps each request's
// headers and raw body, answers with the statuses it is told (200 once they run out), and checks a
// body's X-DBM-Signature against the secret independently of the server's code (node:crypto).
import { createHmac, timingSafeEqual } from 'node:crypto'

export interface ReceivedHook {
  headers: Record<string, string>
  raw: string
  body: any
  path: string
}

export function startWebhookReceiver(options: { statuses?: number[]; hang?: boolean } = {}) {
  const received: ReceivedHook[] = []
  const statuses = [...(options.statuses ?? [])]
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(request) {
      const raw = await request.text()
      const url = new URL(request.url)
      received.push({
        headers: Object.fromEntries(request.headers),
        raw,
        body: JSON.parse(raw),
        path: url.pathname + url.search,
      })
      if (options.hang) await Bun.sleep(2000)
      return new Response('ok', { status: statuses.shift() ?? 200 })
    },
  })
  return {
    url: `http://127.0.0.1:${server.port}`,
    received,
    /** Whether the request's X-DBM-Signature is `sha256=<hex HMAC-SHA256 of the raw body with secret>`. */
    signed(hook: ReceivedHook, secret: string): boolean {
      const expected = Buffer.from(`sha256=${createHmac('sha256', secret).update(hook.raw).digest('hex')}`)
      const given = Buffer.from(hook.headers['x-dbm-signature'] ?? '')
      return given.length === expected.length && timingSafeEqual(given, expected)
    },
    stop: () => server.stop(true),
  }
}
