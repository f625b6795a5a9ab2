// Outgoing mail: SMTP through nodemailer when DBM_SMTP_URL is set, otherwise one log line per mail
// (recipient, subject, link) so a self-hoster without a relay can still verify and reset.
// Mails are sent in the background: a request never waits for (or reveals timing of) a send.
// nodemailer is loaded only when SMTP is configured, in the background (it weighs on `dbm serve`'s start).
import type { Transporter } from 'nodemailer'
import { HIDDEN_CHARACTERS } from '../shared/invisible.ts'
import type { Logger } from '../shared/log.ts'
import { serverMetrics } from './metrics.ts'

const mailOutcomes = {
  sent: serverMetrics.mailDeliveries.labels('sent'),
  failed: serverMetrics.mailDeliveries.labels('failed'),
  logged: serverMetrics.mailDeliveries.labels('logged'),
}

/** Line breaks (of any kind), other control characters, and the hidden ones (bidi, invisible, tags: src/shared/invisible.ts). */
const UNSAFE_IN_MAIL = new RegExp(`[\\u0000-\\u001f\\u007f-\\u009f${HIDDEN_CHARACTERS}]+`, 'gu')
/** Text for a mail header: no line breaks or other control characters. */
export const headerText = (s: string) => s.replace(UNSAFE_IN_MAIL, ' ').slice(0, 200)
/**
 * Text someone else wrote (a finding's title and detail quote statement texts and object names; an
 * invite names its inviter and organization as their users typed them) as one line of a mail's body, so
 * that it cannot add lines of its own to a genuine dbm mail (a fake link, say).
 */
export const mailLine = (s: string) => s.replace(UNSAFE_IN_MAIL, ' ')

export interface Mail {
  to: string
  subject: string
  text: string
  /** The one link the mail is about (verification, reset). */
  link: string
}

export interface Mailer {
  /** Where mails go: an SMTP server (DBM_SMTP_URL), or the server's log only. */
  readonly transport: 'smtp' | 'log'
  /** Queues the mail; failures are logged, never thrown. */
  send(mail: Mail): void
  /** Resolves when every queued mail has been handed over (tests, shutdown). */
  idle(): Promise<void>
  close(): void
}

export function createMailer(options: { smtpUrl?: string; from: string; log: Logger }): Mailer {
  const { log } = options
  const pending = new Set<Promise<void>>()
  const { smtpUrl } = options
  const transport: Promise<Transporter> | undefined = smtpUrl
    ? import('nodemailer').then((m) => m.default.createTransport(smtpUrl))
    : undefined
  // A bad URL fails at the first send (logged there); never as an unhandled rejection.
  transport?.catch(() => {})

  const deliver = async (mail: Mail) => {
    if (!transport) {
      log.info('mail', { to: mail.to, subject: mail.subject, link: mail.link })
      mailOutcomes.logged.inc()
      return
    }
    try {
      await (await transport).sendMail({ from: options.from, to: mail.to, subject: mail.subject, text: mail.text })
      mailOutcomes.sent.inc()
      log.info('mail sent', { to: mail.to, subject: mail.subject })
    } catch (e) {
      mailOutcomes.failed.inc()
      log.error('mail failed', { to: mail.to, subject: mail.subject, cause: (e as Error).message })
    }
  }

  return {
    transport: smtpUrl ? 'smtp' : 'log',
    send(mail) {
      const p = deliver(mail).finally(() => pending.delete(p))
      pending.add(p)
    },
    async idle() {
      while (pending.size > 0) await Promise.all([...pending])
    },
    close() {
      void transport?.then((t) => t.close()).catch(() => {})
    },
  }
}
