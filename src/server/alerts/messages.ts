// The alerting subsystem (alerts/) says what a notification holds and where and how it goes; the
// monitor (monitor/) decides when, and calls it. This file: the words of an alert notification that the
// monitor's mail and webhook and the alert destinations' email and webhook kinds share: the mail to
// users, the signed webhook's JSON body and its X-DBM-Signature. Texts from a monitored database pass through mail.ts's escaping.
import { headerText, mailLine } from '../mail.ts'
import type { PendingNotification } from '../store/monitor/evaluations.ts'

/** `sha256=<hex HMAC-SHA256 of the body with the secret>`: the X-DBM-Signature header of a webhook POST. */
export function webhookSignature(secret: string, body: string): string {
  return `sha256=${new Bun.CryptoHasher('sha256', secret).update(body).digest('hex')}`
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())
/** The dashboard's issues page of the database (the link of mails and webhook payloads). */
export const alertsLink = (publicUrl: string, databaseId: string) =>
  `${publicUrl}/#/databases/${encodeURIComponent(databaseId)}/issues`

export function alertMail(n: PendingNotification, publicUrl: string) {
  const { alert, database } = n
  const opened = n.event !== 'resolved'
  const repeated = n.event === 'repeated'
  const subject = headerText(
    `dbm ${repeated ? 'alert still open' : opened ? 'alert' : 'resolved'}: ${alert.title} on ${database.name}`,
  )
  const link = alertsLink(publicUrl, database.id)
  const where = mailLine(`"${database.name}" (${database.engine}, ${database.host}:${database.port})`)
  const text = [
    repeated
      ? `This alert on ${where} is still open:`
      : opened
        ? `${n.alert.severity === 'critical' ? 'A critical alert' : `An alert (${n.alert.severity})`} opened on ${where}:`
        : `This alert on ${where} is resolved:`,
    '',
    mailLine(alert.title),
    mailLine(alert.detail),
    '',
    // The cause's other findings: one mail for the cause, not one per finding.
    ...(alert.consequences.length > 1
      ? [
          `What it causes (${alert.consequences.length - 1}):`,
          ...alert.consequences.slice(1).map((c) => mailLine(`- ${c.severity}: ${c.title}`)),
          '',
        ]
      : []),
    `Opened: ${iso(alert.opened_at)}`,
    ...(alert.resolved_at !== null ? [`Resolved: ${iso(alert.resolved_at)}`] : []),
    '',
    "The database's issues:",
    link,
    '',
  ].join('\n')
  return { subject, text, link }
}

/** The JSON body of a webhook POST. */
export function webhookPayload(n: PendingNotification, publicUrl: string, now: number) {
  return {
    event: `alert.${n.event}`,
    delivery_id: n.id,
    sent_at: iso(now),
    organization_id: n.org_id,
    database: n.database,
    alert: { ...n.alert, opened_at: iso(n.alert.opened_at), resolved_at: iso(n.alert.resolved_at) },
    link: alertsLink(publicUrl, n.database.id),
  }
}
