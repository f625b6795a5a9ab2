// The page the password-reset mail links to: a form that posts the token and the new password to
// POST /api/v1/auth/reset-password. It stands until the dashboard takes over this route.
import { Elysia } from 'elysia'
import { passwordLength } from '../limits.ts'

const page = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Reset your dbm password</title>
<style>
  :root { color-scheme: light dark; font-family: system-ui, sans-serif; }
  main { max-width: 24rem; margin: 4rem auto; padding: 0 1rem; }
  label, input, button { display: block; width: 100%; box-sizing: border-box; font-size: 1rem; }
  input { margin: .25rem 0 1rem; padding: .5rem; }
  button { padding: .6rem; cursor: pointer; }
  #result { margin-top: 1rem; min-height: 1.5rem; }
</style>
</head>
<body>
<main>
  <h1>Reset your password</h1>
  <form id="form">
    <label for="password">New password (at least ${passwordLength.min} characters)</label>
    <input id="password" name="password" type="password" autocomplete="new-password" minlength="${passwordLength.min}" required>
    <label for="confirm">Repeat it</label>
    <input id="confirm" name="confirm" type="password" autocomplete="new-password" minlength="${passwordLength.min}" required>
    <button type="submit">Set new password</button>
  </form>
  <p id="result" role="status"></p>
</main>
<script src="/reset-password.js"></script>
</body>
</html>
`

const script = `
const form = document.getElementById('form');
const result = document.getElementById('result');
form.addEventListener('submit', async (event) => {
  event.preventDefault();
  const password = form.password.value;
  if (password !== form.confirm.value) { result.textContent = 'The two passwords differ.'; return; }
  const token = new URLSearchParams(location.search).get('token') || '';
  const res = await fetch('/api/v1/auth/reset-password', {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token, password }),
  });
  const body = await res.json().catch(() => ({}));
  result.textContent = res.ok ? body.message : (body.error || 'The reset failed.');
  if (res.ok) form.remove();
});
`

const security = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'",
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
}

export function resetPasswordPage() {
  return new Elysia()
    .get('/reset-password', ({ set }) => {
      Object.assign(set.headers, security, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' })
      return page
    })
    .get('/reset-password.js', ({ set }) => {
      Object.assign(set.headers, security, { 'content-type': 'text/javascript; charset=utf-8' })
      return script
    })
}
