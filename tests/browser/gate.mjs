// A visitor without an account in front of a site, through the site's proxy (nginx or Caddy),
// in headless Chromium: it opens a guarded page with a query string, lands on the waiting page
// (English, and Korean for a Korean browser), loads the site's files while it waits while an
// API call of the site gets the gate's 429 problem, is admitted and comes back to its page with
// the query intact, and is sent to the line again once the origin ends its session. Each
// waiting page is screenshotted into $SHOTS as gate-<language>-$PROXY.png.
//
//   SLUICE_URL=… SLUICE_ADMIN_KEY=… SITE_URL=… GATE_ID=… SALE_ID=… PROXY=nginx SHOTS=dir node gate.mjs

import { mkdirSync } from 'node:fs';
import { call, check, launch } from './common.mjs';

const SITE = process.env.SITE_URL;
const GATE = process.env.GATE_ID;
const SALE = process.env.SALE_ID;
const PROXY = process.env.PROXY;
const SHOTS = process.env.SHOTS;
const admin = { 'X-Admin-Key': process.env.SLUICE_ADMIN_KEY };
mkdirSync(SHOTS, { recursive: true });

const browser = await launch();
const page_ = '/shop/item?size=42&colour=blue%20green';

// The line holds still while the visitors wait.
await call(admin, 'POST', `/v1/sales/${SALE}/pause`);

async function waiting(locale) {
  const context = await browser.newContext({ locale, viewport: { width: 390, height: 844 } });
  const page = await context.newPage();
  await page.goto(`${SITE}${page_}`);
  check(page.url().startsWith(`${SITE}/.sluice/?gate=${GATE}&return_to=`), `${PROXY} ${locale}: on the waiting page (${page.url()})`);
  await page.waitForSelector('#step-queued:not([hidden])', { timeout: 15000 });
  await page.waitForFunction(() => document.getElementById('position').textContent.trim() !== '–');
  return { context, page };
}

const en = await waiting('en-GB');
check(await en.page.evaluate(() => document.documentElement.lang) === 'en', `${PROXY}: in English`);
check((await en.page.textContent('#title')).length > 0, `${PROXY}: a title`);
await en.page.screenshot({ path: `${SHOTS}/gate-en-${PROXY}.png` });

// While it waits: the site's files load, its API answers the gate's problem.
const meanwhile = await en.page.evaluate(async () => {
  const css = await fetch('/shop/app.css');
  const api = await fetch('/shop/api/cart', { headers: { Accept: 'application/json' } });
  return { css: css.status, api: api.status, type: api.headers.get('content-type'), body: await api.json(), retry: api.headers.get('retry-after') };
});
check(meanwhile.css === 200, `${PROXY}: the site's style sheet loaded while waiting`);
check(meanwhile.api === 429 && meanwhile.type === 'application/problem+json', `${PROXY}: an XHR got a 429 problem`);
check(meanwhile.body.type === '/problems/waiting-room' && meanwhile.body.waiting_room.includes('/.sluice/?gate='), `${PROXY}: the problem names the waiting room`);
check(Number(meanwhile.retry) > 0, `${PROXY}: with Retry-After`);

const ko = await waiting('ko-KR');
check(await ko.page.evaluate(() => document.documentElement.lang) === 'ko', `${PROXY}: in Korean`);
check(/[가-힣]/.test(await ko.page.textContent('#title')), `${PROXY}: a Korean title`);
await ko.page.screenshot({ path: `${SHOTS}/gate-ko-${PROXY}.png` });

// A refresh keeps the place.
const before = await en.page.textContent('#position');
await en.page.reload();
await en.page.waitForSelector('#step-queued:not([hidden])', { timeout: 15000 });
check(await en.page.textContent('#position') === before, `${PROXY}: a refresh keeps the place (${before})`);

// The line moves: admitted, back to the page first asked for, the query intact.
await call(admin, 'POST', `/v1/sales/${SALE}/resume`);
await en.page.waitForURL(`${SITE}${page_}`, { timeout: 20000 });
check(await en.page.textContent('#uri') === page_, `${PROXY}: back on its page with the query intact`);
const visitor = (await en.page.textContent('#visitor')).trim();
check(visitor.length === 32, `${PROXY}: the origin learned the visitor (${visitor})`);
check(!en.page.url().includes('token') && !en.page.url().includes('admission'), `${PROXY}: no token in the address`);
const cookies = await en.context.cookies();
const session = cookies.find((c) => c.name === 'sluice_session');
check(session && session.httpOnly && session.sameSite === 'Lax', `${PROXY}: the session cookie is HttpOnly and SameSite=Lax`);

// The origin ends the session: the next page is the line again.
await call(admin, 'POST', `/v1/gates/${GATE}/sessions/${visitor}/end`);
await en.page.goto(`${SITE}${page_}`);
check(en.page.url().includes('/.sluice/?gate='), `${PROXY}: sent to the line again after the session ended`);

await browser.close();
console.log('all checks passed');
