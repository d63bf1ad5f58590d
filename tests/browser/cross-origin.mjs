// A shop's own page on another origin calls sluice from the browser, as a frontend team's
// would: it joins (a POST with a bearer token, so the browser sends a preflight first),
// reads its status and the exposed Retry-After header. A page on an origin sluice does not list
// is kept from reading any answer. Both pages are served here, on two loopback ports of their
// own; sluice runs at $SLUICE_URL with $SHOP_PORT's origin listed.
//
//   SLUICE_URL=… SLUICE_ADMIN_KEY=… SLUICE_USER_SECRET=… SHOP_PORT=… OTHER_PORT=… node cross-origin.mjs

import { createServer } from 'node:http';
import { check, launch, token } from './common.mjs';

const BASE = process.env.SLUICE_URL;
const ADMIN_KEY = process.env.SLUICE_ADMIN_KEY;

// The shop's page: its script calls sluice on the other origin and writes what it saw.
const PAGE = `<!doctype html><meta charset="utf-8"><title>Shop</title><pre id="out">running</pre>
<script type="module">
const out = document.getElementById('out');
const params = new URLSearchParams(location.hash.slice(1));
const api = params.get('api'), sale = params.get('sale'), auth = { Authorization: 'Bearer ' + params.get('token') };
try {
  const joined = await fetch(api + '/v1/sales/' + sale + '/attempts', {
    method: 'POST', headers: auth });
  const attempt = await joined.json();
  const polled = await fetch(api + '/v1/attempts/' + attempt.attempt_id, { headers: auth });
  const status = await polled.json();
  out.textContent = JSON.stringify({ ok: true, joined: joined.status, state: status.state,
    position: status.position, retryAfter: polled.headers.get('Retry-After') });
} catch (e) {
  out.textContent = JSON.stringify({ ok: false, error: String(e) });
}
</script>`;

function serve(port) {
  const server = createServer((req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    res.end(PAGE);
  });
  return new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve(server)));
}

const sale = await (await fetch(`${BASE}/v1/sales`, {
  method: 'POST',
  headers: { 'X-Admin-Key': ADMIN_KEY, 'Content-Type': 'application/json' },
  // Paused: the users stay in line, so their status carries a place and a Retry-After.
  body: JSON.stringify({ name: 'Cross-origin', quantity: 5 }),
})).json();
await fetch(`${BASE}/v1/sales/${sale.id}/pause`, { method: 'POST', headers: { 'X-Admin-Key': ADMIN_KEY } });

const shop = await serve(Number(process.env.SHOP_PORT));
const other = await serve(Number(process.env.OTHER_PORT));
const browser = await launch();

async function visit(port, user) {
  const page = await browser.newPage();
  await page.goto(`http://127.0.0.1:${port}/#api=${encodeURIComponent(BASE)}&sale=${sale.id}&token=${token(user)}`);
  await page.locator('#out').filter({ hasNotText: 'running' }).waitFor({ timeout: 15000 });
  const seen = JSON.parse(await page.locator('#out').textContent());
  await page.close();
  return seen;
}

try {
  const listed = await visit(process.env.SHOP_PORT, 'shopper');
  check(listed.ok, `the listed origin's page calls sluice: ${JSON.stringify(listed)}`);
  check(listed.joined === 202 && listed.state === 'QUEUED' && listed.position === 1,
    'it joined and read its place in line');
  check(Number(listed.retryAfter) >= 1, `it reads the exposed Retry-After (${listed.retryAfter})`);

  const unlisted = await visit(process.env.OTHER_PORT, 'stranger');
  check(!unlisted.ok && /TypeError|Failed to fetch/.test(unlisted.error),
    `a page on an unlisted origin cannot read sluice's answers: ${JSON.stringify(unlisted)}`);
  console.log('all checks passed');
} finally {
  await browser.close();
  shop.close();
  other.close();
}
