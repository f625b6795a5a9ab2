// A real SMTP receiver (smtp-server on a loopback port) that keeps every message it accepts, parsed
// into envelope, headers and decoded text: the mail tests and the alert notification tests read it.
import type { AddressInfo } from 'node:net'
import { SMTPServer } from 'smtp-server'

export interface ReceivedMail {
  envelopeFrom: string
  envelopeTo: string[]
  headers: Record<string, string>
  text: string
}

/** Decodes a quoted-printable body (soft line breaks and =XX escapes, as UTF-8). */
function decodeQuotedPrintable(body: string): string {
  const bytes: number[] = []
  const flat = body.replace(/=\r?\n/g, '')
  for (let i = 0; i < flat.length; i++) {
    const hex = flat[i] === '=' ? /^[0-9A-F]{2}$/i.exec(flat.slice(i + 1, i + 3))?.[0] : undefined
    if (hex) {
      bytes.push(Number.parseInt(hex, 16))
      i += 2
    } else {
      bytes.push(...new TextEncoder().encode(flat[i]!))
    }
  }
  return new TextDecoder().decode(new Uint8Array(bytes))
}

/** Splits a raw RFC 5322 message into unfolded, lower-cased headers and the decoded text body. */
function parseMessage(raw: string): { headers: Record<string, string>; text: string } {
  const split = raw.indexOf('\r\n\r\n')
  const head = raw.slice(0, split).replace(/\r\n[ \t]+/g, ' ')
  const body = raw.slice(split + 4)
  const headers: Record<string, string> = {}
  for (const line of head.split('\r\n')) {
    const colon = line.indexOf(':')
    headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim()
  }
  const encoding = (headers['content-transfer-encoding'] ?? '7bit').toLowerCase()
  const text =
    encoding === 'quoted-printable'
      ? decodeQuotedPrintable(body)
      : encoding === 'base64'
        ? Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8')
        : body
  return { headers, text: text.replace(/\r\n/g, '\n') }
}

/** A real SMTP receiver on a loopback port that keeps every message it accepts. */
export async function startSmtpReceiver() {
  const received: ReceivedMail[] = []
  const smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = []
      stream.on('data', (chunk: Buffer) => chunks.push(chunk))
      stream.on('end', () => {
        received.push({
          envelopeFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          envelopeTo: session.envelope.rcptTo.map((r) => r.address),
          ...parseMessage(Buffer.concat(chunks).toString('utf8')),
        })
        callback()
      })
    },
  })
  await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', () => resolve()))
  const port = (smtp.server.address() as AddressInfo).port
  return {
    url: `smtp://127.0.0.1:${port}`,
    received,
    /** The first mail to `to` whose subject matches, waiting for it at most `ms`. */
    async waitFor(to: string, subject: RegExp, ms = 5000): Promise<ReceivedMail> {
      const deadline = Date.now() + ms
      for (;;) {
        const mail = received.find((m) => m.envelopeTo.includes(to) && subject.test(m.headers.subject ?? ''))
        if (mail) return mail
        if (Date.now() > deadline) throw new Error(`no mail to ${to} matching ${subject} within ${ms} ms`)
        await Bun.sleep(25)
      }
    },
    close: () => new Promise<void>((resolve) => smtp.close(() => resolve())),
  }
}
