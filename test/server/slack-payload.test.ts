// Slack's payload from hostile names: the blocks carry every text as plain_text, and the one field Slack
// reads as mrkdwn (`text`, the notification's and the fallback's) has `&`, `<` and `>` escaped, so a
// table named `<!channel>` or `<http://evil.example|click>` mentions no one and links nowhere.
import { expect, test } from 'bun:test'
import { type AlertMessage, slackEscape, slackPayload } from '../../src/server/alerts/payloads.ts'

const hostile = 'public."<!channel> <http://evil.example|click> *bold* & `code`"'

const message: AlertMessage = {
  delivery_id: 'd1',
  event: 'opened',
  test: false,
  org_id: 'o1',
  alert: {
    id: 'a1',
    key: 'k',
    rule: 'pg_dead_tuples',
    severity: 'critical',
    title: `Many dead rows in ${hostile}`,
    detail: 'detail',
    opened_at: 0,
    resolved_at: null,
    consequences: [],
  },
  database: { id: 'db1', name: '<@U123> prod', engine: 'postgres', host: 'h', port: 5432 },
  link: 'https://dbm.example/#/databases/db1/issues',
  now: 0,
}

test("Slack's mrkdwn text escapes &, < and >; the blocks stay plain_text", () => {
  const payload = slackPayload(message)
  expect(payload.text).toBe(
    'Alert: Many dead rows in public."&lt;!channel&gt; &lt;http://evil.example|click&gt; *bold* &amp; `code`" on &lt;@U123&gt; prod',
  )
  expect(payload.text).not.toMatch(/[<>]/)
  const texts = JSON.stringify(payload.blocks)
  expect(texts).not.toContain('"mrkdwn"')
  expect(payload.blocks[0]).toEqual({
    type: 'header',
    text: { type: 'plain_text', text: `Alert: Many dead rows in ${hostile}`, emoji: false },
  })
  expect(slackEscape('a & b < c > d')).toBe('a &amp; b &lt; c &gt; d')
})
