// Outgoing mail through a real SMTP relay (an smtp-server receiver on loopback): the verification
// mail at signup and the password-reset mail, their links followed against the server, silence for
// unknown addresses, a relay that is down, and the log-line fallback when no SMTP URL is set.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { freePort } from './support/postgres.ts'
import { type TestServer, signup, startTestServer, uniqueIp, verifyCall } from './support/server.ts'
import { startSmtpReceiver } from './support/smtp.ts'

const linksIn = (text: string, prefix: string) => {
  const escaped = prefix.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')
  return [...text.matchAll(new RegExp(`${escaped}[A-Za-z0-9_-]+`, 'g'))].map((m) => m[0])
}

describe('mail through an SMTP relay', () => {
  let smtp: Awaited<ReturnType<typeof startSmtpReceiver>>
  let server: TestServer
  beforeAll(async () => {
    smtp = await startSmtpReceiver()
    server = await startTestServer('sqlite', { smtpUrl: smtp.url, publicUrl: 'https://dbm.example.org' })
  })
  afterAll(async () => {
    await server?.stop()
    await smtp?.close()
  })

  test('signup sends a verification mail whose link verifies the organization', async () => {
    const account = await signup(server)
    const mail = await smtp.waitFor(account.email, /verify/i)
    expect(mail.envelopeFrom).toBe('dbm@test')
    expect(mail.envelopeTo).toEqual([account.email])
    expect(mail.headers.to).toBe(account.email)
    expect(mail.headers.from).toBe('dbm <dbm@test>')
    expect(mail.headers.subject).toBe('Verify your email address for dbm')
    const links = linksIn(mail.text, 'https://dbm.example.org/#/verify?token=')
    expect(links).toHaveLength(1)
    expect(links[0]).toMatch(/^https:\/\/dbm\.example\.org\/#\/verify\?token=[A-Za-z0-9_-]{43}$/)
    expect(mail.text).toContain(`\n${links[0]}\n`)

    const before = await server.call('GET', '/api/v1/auth/me', { token: account.token })
    expect(before.body.organization.verified).toBe(false)

    // The link opens the dashboard's verify page, which makes this call.
    const call = verifyCall(links[0]!)
    const verified = await server.call('GET', call)
    expect(verified).toMatchObject({ status: 200, body: { verified: true, message: 'email address verified' } })
    const me = await server.call('GET', '/api/v1/auth/me', { token: account.token })
    expect(me.status).toBe(200)
    expect(me.body.organization.verified).toBe(true)
    expect(me.body.user.email_verified).toBe(true)

    // Opening the link again says so instead of calling it invalid.
    const again = await server.call('GET', call)
    expect({ status: again.status, body: again.body }).toEqual({
      status: 200,
      body: { verified: true, message: 'email already verified' },
    })

    // Sent through the relay, so the log records the send without the link.
    const logged = server.logs.filter((l) => l.includes(`to=${account.email}`))
    expect(logged).toHaveLength(1)
    expect(logged[0]).toMatch(
      new RegExp(
        `^\\S+ INFO mail sent to=${account.email.replaceAll('.', '\\.')} subject="Verify your email address for dbm"$`,
      ),
    )
    expect(server.logs.join('\n')).not.toContain(new URLSearchParams(call.split('?')[1]).get('token')!)
  })

  test('forgot-password mails a reset link whose token sets a new password', async () => {
    const account = await signup(server)
    const res = await server.call('POST', '/api/v1/auth/forgot-password', {
      ip: uniqueIp(),
      body: { email: account.email },
    })
    expect({ status: res.status, body: res.body }).toEqual({
      status: 200,
      body: { message: 'if an account exists for that email, a password reset link has been sent' },
    })
    const mail = await smtp.waitFor(account.email, /reset/i)
    expect(mail.envelopeTo).toEqual([account.email])
    expect(mail.headers.subject).toBe('Reset your dbm password')
    const links = linksIn(mail.text, 'https://dbm.example.org/reset-password?token=')
    expect(links).toHaveLength(1)
    const token = new URL(links[0]!).searchParams.get('token')!
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/)

    const newPassword = 'a brand new passphrase'
    const reset = await server.call('POST', '/api/v1/auth/reset-password', {
      ip: uniqueIp(),
      body: { token, password: newPassword },
    })
    expect({ status: reset.status, body: reset.body }).toEqual({
      status: 200,
      body: { message: 'password updated; sign in with the new password' },
    })

    const login = (password: string) =>
      server.call('POST', '/api/v1/auth/login', { ip: uniqueIp(), body: { email: account.email, password } })
    const withNew = await login(newPassword)
    expect(withNew.status).toBe(200)
    expect(typeof withNew.body.access_token).toBe('string')
    const withOld = await login(account.password)
    expect({ status: withOld.status, body: withOld.body }).toEqual({
      status: 401,
      body: { error: 'invalid email or password' },
    })

    const reused = await server.call('POST', '/api/v1/auth/reset-password', {
      ip: uniqueIp(),
      body: { token, password: 'yet another passphrase' },
    })
    expect({ status: reused.status, body: reused.body }).toEqual({
      status: 400,
      body: { error: 'invalid or expired reset token' },
    })
  })

  test('forgot-password for an unknown address sends nothing and answers exactly as for a known one', async () => {
    const account = await signup(server)
    const unknown = `nobody-${Date.now()}@example.com`
    const forgot = (email: string) =>
      server.call('POST', '/api/v1/auth/forgot-password', { ip: uniqueIp(), body: { email } })

    const forUnknown = await forgot(unknown)
    const forKnown = await forgot(account.email)
    expect({ status: forUnknown.status, body: forUnknown.body }).toEqual({
      status: forKnown.status,
      body: forKnown.body,
    })
    expect(forKnown.status).toBe(200)
    expect(forUnknown.headers.get('content-type')).toBe(forKnown.headers.get('content-type'))

    await smtp.waitFor(account.email, /reset/i)
    await server.deps.mailer.idle()
    expect(smtp.received.filter((m) => m.envelopeTo.includes(unknown))).toEqual([])
    expect(server.logs.filter((l) => l.includes(unknown))).toEqual([])
  })
})

describe('mail with a relay that is down', () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startTestServer('sqlite', {
      smtpUrl: `smtp://127.0.0.1:${await freePort()}`,
      publicUrl: 'https://dbm.example.org',
    })
  })
  afterAll(async () => {
    await server?.stop()
  })

  test('signup still succeeds and the failed send is logged as one error line', async () => {
    const account = await signup(server)
    await server.deps.mailer.idle()
    const lines = server.logs.filter((l) => l.includes(`to=${account.email}`))
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(
      new RegExp(
        `^\\S+ ERROR mail failed to=${account.email.replaceAll('.', '\\.')} subject="Verify your email address for dbm" cause=.*ECONNREFUSED`,
      ),
    )
  })
})

describe('mail without an SMTP relay', () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startTestServer('sqlite')
  })
  afterAll(async () => {
    await server?.stop()
  })

  const mailLines = (email: string) => server.logs.filter((l) => l.includes(' INFO mail ') && l.includes(`to=${email}`))

  test('the verification mail is one log line with recipient, subject and link, and the link works', async () => {
    const account = await signup(server)
    await server.deps.mailer.idle()
    const lines = mailLines(account.email)
    expect(lines).toHaveLength(1)
    const m = new RegExp(
      `^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z INFO mail to=${account.email.replaceAll('.', '\\.')} ` +
        'subject="Verify your email address for dbm" link="(http://dbm\\.test:8080/#/verify\\?token=[A-Za-z0-9_-]{43})"$',
    ).exec(lines[0]!)
    expect(m).not.toBeNull()

    expect((await server.call('GET', verifyCall(m![1]!))).status).toBe(200)
    const me = await server.call('GET', '/api/v1/auth/me', { token: account.token })
    expect(me.body.organization.verified).toBe(true)
  })

  test('the reset mail is one log line with its link; none for an unknown address', async () => {
    const account = await signup(server)
    const unknown = `nobody-${Date.now()}@example.com`
    for (const email of [account.email, unknown]) {
      const res = await server.call('POST', '/api/v1/auth/forgot-password', { ip: uniqueIp(), body: { email } })
      expect(res.status).toBe(200)
    }
    await server.deps.mailer.idle()
    const lines = mailLines(account.email).filter((l) => l.includes('subject="Reset'))
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(
      new RegExp(
        `^\\S+ INFO mail to=${account.email.replaceAll('.', '\\.')} subject="Reset your dbm password" ` +
          'link="http://dbm\\.test:8080/reset-password\\?token=[A-Za-z0-9_-]{43}"$',
      ),
    )
    expect(server.logs.filter((l) => l.includes(unknown))).toEqual([])
  })
})
