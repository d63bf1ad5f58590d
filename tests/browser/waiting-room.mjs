// The waiting-room page end to end in headless Chromium on a phone-sized screen, driven by
// the keyboard where a user would: join → live place in line → admitted → hold → pay in the
// sandbox → confirmed; a sale that sells out under the user; an admission that times out;
// seats chosen by keyboard; a sale that closes before the user joins; a sale that sells out
// while the user waits; a sale that asks for proof of work; a lottery sale before its opening;
// the page in Korean and back in English; the page opened without a sign-in. Each key state is screenshotted
// into $SHOTS (the Rust test checks the images) and its text and focus are asserted here.
//
//   SLUICE_URL=… SLUICE_ADMIN_KEY=… SLUICE_USER_SECRET=… SHOTS=dir node waiting-room.mjs

import { mkdirSync } from 'node:fs';
import { check, launch, token } from './common.mjs';

const BASE = process.env.SLUICE_URL;
const ADMIN_KEY = process.env.SLUICE_ADMIN_KEY;
const SHOTS = process.env.SHOTS;
const PHONE = { width: 390, height: 844 };
mkdirSync(SHOTS, { recursive: true });

async function admin(method, path, body) {
  const res = await fetch(`${BASE}${path}`, {
    method,
    headers: { 'X-Admin-Key': ADMIN_KEY, 'Content-Type': 'application/json' },
    body: body ? JSON.stringify(body) : undefined,
  });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return res.json();
}

async function asUser(user, method, path, body) {
  const res = await fetch(`${BASE}${path}`, {
    method,
    headers: { Authorization: `Bearer ${token(user)}`, 'Content-Type': 'application/json' },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: await res.json() };
}

async function sale(overrides) {
  return (await admin('POST', '/v1/sales', {
    name: 'Summer tour — Berlin', quantity: 10, per_user_limit: 4, rate_per_minute: 60000,
    max_active: 1000, admission_ttl_secs: 60, hold_ttl_secs: 120, payment_ttl_secs: 120,
    ...overrides,
  })).id;
}

const browser = await launch();

// Another buyer, through the API: joins and waits for the turn; the admitted status.
async function admittedAs(user, saleId) {
  let attempt = (await asUser(user, 'POST', `/v1/sales/${saleId}/attempts`)).body;
  for (let i = 0; i < 100 && attempt.state !== 'ADMITTED'; i++) {
    await new Promise((r) => setTimeout(r, 100));
    attempt = (await asUser(user, 'GET', `/v1/attempts/${attempt.attempt_id}`)).body;
  }
  return attempt;
}

async function phone(user, saleId) {
  const context = await browser.newContext({ viewport: PHONE, deviceScaleFactor: 1, hasTouch: true, isMobile: true });
  const page = await context.newPage();
  page.on('pageerror', (e) => { throw new Error(`page error: ${e.message}`); });
  const streams = [];
  page.on('request', (r) => { if (new URL(r.url()).pathname.endsWith('/events')) streams.push(r.url()); });
  await page.goto(`${BASE}/?sale=${saleId}#token=${token(user)}`);
  return { page, context, streams };
}

const title = (page) => page.locator('h1');
const status = (page) => page.getByRole('status');
async function waitTitle(page, text) {
  await title(page).filter({ hasText: text }).waitFor({ timeout: 20000 });
}
async function focusedId(page) {
  return page.evaluate(() => document.activeElement && document.activeElement.id);
}
async function shot(page, name) {
  await page.screenshot({ path: `${SHOTS}/${name}.png` });
}

try {
  // 1. The whole way, by keyboard, on a phone.
  {
    const id = await sale({});
    await admin('POST', `/v1/sales/${id}/pause`); // joins wait: the queue is visible
    const { page, context, streams } = await phone('browser-alice', id);
    await waitTitle(page, 'Summer tour');
    check(!page.url().includes('token='), 'the token is gone from the address bar');
    check(await page.evaluate(() => document.documentElement.lang) === 'en', 'the page declares its language');
    await page.keyboard.press('Tab');
    check(await focusedId(page) === 'join', 'Tab reaches "Join the queue" first');
    await page.keyboard.press('Enter');
    await waitTitle(page, "You're in line");
    check(await focusedId(page) === 'title', 'focus moves to the new step\'s heading');
    await status(page).filter({ hasText: 'number 1 in line' }).waitFor();
    check(await page.locator('#position').textContent() === '1', 'the place in line is shown');
    check(await page.locator('#queued-left').textContent() === '10 left', 'what is left is shown while waiting');
    check(!(await page.getByRole('button', { name: 'Join the queue' }).isVisible()), 'only the current step is shown');
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    check(width <= PHONE.width, `no sideways scrolling on a phone (${width}px)`);
    await shot(page, 'queued');

    await admin('POST', `/v1/sales/${id}/resume`);
    await waitTitle(page, "It's your turn");
    check(streams.length >= 1, 'status arrives over Server-Sent Events');
    await status(page).filter({ hasText: 'It is your turn' }).waitFor();
    check(await page.getByLabel(/How many tickets/).isVisible(), 'the quantity field is labelled');
    await shot(page, 'admitted');

    await page.keyboard.press('Tab'); // the quantity field
    check(await focusedId(page) === 'quantity', 'Tab reaches the quantity field');
    await page.keyboard.press('Control+A');
    await page.keyboard.type('2');
    await page.keyboard.press('Tab');
    check(await focusedId(page) === 'hold', 'then the Hold button');
    await page.keyboard.press('Enter');
    await waitTitle(page, 'Held for you');
    check((await page.locator('#held-what').textContent()).startsWith('2 tickets held'), 'the hold says what is held');
    check(/^\d+:\d\d$/.test(await page.locator('#hold-countdown').textContent()), 'the hold counts down');
    await shot(page, 'held');

    await page.keyboard.press('Tab');
    check(await focusedId(page) === 'checkout', 'Tab reaches "Go to payment"');
    await page.keyboard.press('Enter');
    await waitTitle(page, 'Payment');
    await page.getByRole('button', { name: 'Pay now' }).click();
    await waitTitle(page, 'Confirmed');
    await status(page).filter({ hasText: 'Confirmed' }).waitFor();
    check((await page.locator('#done-text').textContent()).startsWith('2 tickets'), 'the confirmation says what was bought');
    check(!(await page.getByRole('button', { name: 'Join again' }).isVisible()), 'a confirmed buyer is not offered to join again');
    await shot(page, 'confirmed');
    const stats = await admin('GET', `/v1/sales/${id}/stats`);
    check(stats.confirmed === 1 && stats.remaining === 8, 'the ledger agrees: 1 confirmed, 8 left');
    await context.close();
  }

  // 2. Sold out under the user: someone else takes the last unit first.
  {
    const id = await sale({ quantity: 1 });
    const { page, context } = await phone('browser-bob', id);
    await waitTitle(page, 'Summer tour');
    await page.getByRole('button', { name: 'Join the queue' }).click();
    await waitTitle(page, "It's your turn");
    const carol = await admittedAs('browser-carol', id);
    const held = await asUser('browser-carol', 'POST', `/v1/attempts/${carol.attempt_id}/hold`,
      { admission_token: carol.admission_token, quantity: 1 });
    check(held.status === 200, 'another buyer holds the last unit');
    await page.getByRole('button', { name: 'Hold my tickets' }).click();
    await waitTitle(page, 'Sold out');
    await status(page).filter({ hasText: 'Sold out' }).waitFor();
    check((await page.locator('#done-text').textContent()).includes('Nothing was charged'), 'sold out is explained');
    check(!(await page.getByRole('button', { name: 'Join again' }).isVisible()), 'sold out offers no dead end button');
    await shot(page, 'sold-out');
    await context.close();
  }

  // 3. Admitted, then idle: the turn passes and the page says so.
  {
    const id = await sale({ admission_ttl_secs: 1 });
    const { page, context } = await phone('browser-dave', id);
    await waitTitle(page, 'Summer tour');
    await page.getByRole('button', { name: 'Join the queue' }).click();
    await waitTitle(page, "Time's up");
    check((await page.locator('#done-text').textContent()).includes('Your turn passed'), 'the expiry reason is explained');
    check(await page.getByRole('button', { name: 'Join again' }).isVisible(), 'the user can join again');
    await shot(page, 'expired');
    await context.close();
  }

  // 4. A seated sale: the free seats are checkboxes; pick one by keyboard and hold it.
  {
    const id = await sale({ quantity: undefined, seats: ['A-1', 'A-2', 'A-3', 'B-1'] });
    const { page, context } = await phone('browser-erin', id);
    await waitTitle(page, 'Summer tour');
    await page.getByRole('button', { name: 'Join the queue' }).click();
    await waitTitle(page, "It's your turn");
    const seats = page.getByRole('checkbox');
    check(await seats.count() === 4, 'every free seat is offered');
    check(await page.getByRole('group', { name: /Choose your seats/ }).isVisible(), 'the seats form a labelled group');
    await page.getByRole('checkbox', { name: 'A-2' }).focus();
    await page.keyboard.press('Space');
    await shot(page, 'seats');
    await page.getByRole('button', { name: 'Hold my tickets' }).click();
    await waitTitle(page, 'Held for you');
    check((await page.locator('#held-what').textContent()).startsWith('Seats A-2 held'), 'the chosen seat is held');
    await context.close();
  }

  // 5. The sale's closing time passes while the page offers to join: joining says so.
  {
    // Far enough ahead that the page has loaded before it, on a busy machine too.
    const closesAt = new Date(Date.now() + 4000);
    const id = await sale({ closes_at: closesAt.toISOString() });
    const { page, context } = await phone('browser-erin', id);
    await waitTitle(page, 'Summer tour');
    await new Promise((r) => setTimeout(r, Math.max(0, closesAt - Date.now()) + 300));
    await page.getByRole('button', { name: 'Join the queue' }).click();
    await waitTitle(page, 'Sale closed');
    check((await page.locator('#done-text').textContent()).includes('no more joins'), 'a closed sale is explained');
    check(!(await page.getByRole('button', { name: 'Join again' }).isVisible()), 'a closed sale offers no dead end button');
    await shot(page, 'sale-closed');
    await context.close();
  }

  // 6. Sold out while the user waits: told at once, not at the turn.
  {
    const id = await sale({ quantity: 1 });
    const ivan = await admittedAs('browser-ivan', id);
    const held = await asUser('browser-ivan', 'POST', `/v1/attempts/${ivan.attempt_id}/hold`,
      { admission_token: ivan.admission_token, quantity: 1 });
    check(held.status === 200, 'another buyer holds the only unit');
    const paying = await asUser('browser-ivan', 'POST', `/v1/attempts/${ivan.attempt_id}/checkout`);
    await admin('POST', `/v1/sales/${id}/pause`); // the next user waits
    const { page, context } = await phone('browser-judy', id);
    await waitTitle(page, 'Summer tour');
    await page.getByRole('button', { name: 'Join the queue' }).click();
    await waitTitle(page, "You're in line");
    await asUser('browser-ivan', 'POST', `/sandbox/payments/${paying.body.payment.reference}`,
      { outcome: 'approve' });
    await waitTitle(page, 'Sold out');
    check((await page.locator('#done-text').textContent()).includes('sold while you waited'), 'sold out while waiting is explained');
    await shot(page, 'sold-out-waiting');
    const stats = await admin('GET', `/v1/sales/${id}/stats`);
    check(stats.waiting === 0, 'the page gave its place up');
    await context.close();
  }

  // 8. A sale that asks for proof of work: the page does the work itself, in a Web Worker,
  //    showing its progress, and joins with it.
  {
    const id = await sale({});
    await admin('POST', `/v1/sales/${id}/pause`);
    await admin('PUT', `/v1/sales/${id}/proof-of-work`, { difficulty_bits: 18 });
    const { page, context } = await phone('browser-pow', id);
    const workers = [];
    page.on('worker', (w) => workers.push(w.url()));
    await waitTitle(page, 'Summer tour');
    // Luck decides how long the work takes (a lucky nonce may come in a few milliseconds):
    // the join it leads to is held back a moment, so the step that shows the work stays on
    // screen until its answer, whatever luck did.
    await page.route(`**/v1/sales/${id}/attempts`, async (route) => {
      await new Promise((done) => setTimeout(done, 1500));
      await route.continue();
    });
    const joined = page.waitForRequest((r) => r.method() === 'POST' && r.url().endsWith(`/v1/sales/${id}/attempts`));
    await page.getByRole('button', { name: 'Join the queue' }).click();
    await title(page).filter({ hasText: 'Checking this browser' }).waitFor({ timeout: 20000 });
    check(await page.locator('#proof-progress').isVisible(), 'the work shows its progress');
    await shot(page, 'proof-of-work');
    check(Boolean((await joined).headers()['sluice-proof-of-work']), 'the join carries the work');
    await waitTitle(page, "You're in line");
    check(workers.some((u) => u.endsWith('/waiting-room/proof-of-work.js')), 'the work ran in a Web Worker');
    check(!(await page.locator('#alert').isVisible()), 'no error on the way');
    const stats = await admin('GET', `/v1/sales/${id}/stats`);
    check(stats.waiting === 1, 'the join with proof of work is in the queue');
    await context.close();
  }

  // 10. A lottery sale before its opening: the page says the order is drawn then (joining early
  //     gives no advantage) and that the place shown until then is not the one that counts.
  {
    const opensAt = new Date(Date.now() + 3600 * 1000);
    const id = await sale({ opens_at: opensAt.toISOString(), opening: 'lottery_at_open', lottery_seed: 'browser-seed' });
    const { page, context } = await phone('browser-lottery', id);
    await waitTitle(page, 'Summer tour');
    check((await page.locator('#join-intro').textContent()).includes('drawn by lot'), 'a lottery sale says its order is drawn');
    await page.getByRole('button', { name: 'Join the queue' }).click();
    await waitTitle(page, "You're in line");
    check(await page.locator('#lottery-note').isVisible(), 'the place before the draw is said not to count yet');
    check((await page.locator('#lottery-note').textContent()).includes('not the one that counts'), 'in those words');
    await context.close();
  }

  // 9. In Korean, from the browser's language, with the switch back to English; what is left
  //    is shown, the shop's name and colour are the configured ones.
  {
    const id = await sale({ name: '서울 콘서트 — Seoul' });
    await admin('POST', `/v1/sales/${id}/pause`);
    const context = await browser.newContext({ viewport: PHONE, deviceScaleFactor: 1, locale: 'ko-KR' });
    const page = await context.newPage();
    page.on('pageerror', (e) => { throw new Error(`page error: ${e.message}`); });
    await page.goto(`${BASE}/?sale=${id}#token=${token('browser-kim')}`);
    await waitTitle(page, '서울 콘서트');
    check(await page.evaluate(() => document.documentElement.lang) === 'ko', 'a Korean browser gets the page in Korean');
    check(await page.getByRole('button', { name: '대기열에 줄 서기' }).isVisible(), 'the join button speaks Korean');
    check((await page.locator('#join-left').textContent()) === '10장 남음', 'what is left is shown before joining');
    await page.getByRole('button', { name: '대기열에 줄 서기' }).click();
    await waitTitle(page, '대기 중입니다');
    await status(page).filter({ hasText: '현재 대기 순서는 1번입니다' }).waitFor();
    check((await page.getByRole('status').getAttribute('aria-live')) === 'polite', 'changes of place are read out (aria-live)');
    if (process.env.SHOP_NAME) {
      check((await page.locator('#shop-name').textContent()) === process.env.SHOP_NAME, "the shop's name is shown");
      const accent = await page.evaluate(() => getComputedStyle(document.getElementById('leave')).color);
      check(accent === process.env.SHOP_ACCENT_RGB, `the shop's colour is used (${accent})`);
    }
    const icon = await page.evaluate(async () => {
      const res = await fetch(document.querySelector('link[rel=icon]').href);
      return `${res.status} ${res.headers.get('content-type')}`;
    });
    check(icon === '200 image/svg+xml', `the page has a favicon (${icon})`);
    await shot(page, 'queued-ko');
    await page.getByLabel('언어').selectOption('en');
    await waitTitle(page, "You're in line");
    check(await page.evaluate(() => document.documentElement.lang) === 'en', 'the switch changes the language');
    check(await page.getByRole('button', { name: 'Leave the queue' }).isVisible(), 'in English now');
    await shot(page, 'queued-en');
    await page.reload();
    await waitTitle(page, "You're in line");
    check(await page.evaluate(() => document.documentElement.lang) === 'en', 'the choice is remembered');
    await context.close();
  }

  // 7. Opened without a sign-in: a clear message, no crash.
  {
    const context = await browser.newContext({ viewport: PHONE, deviceScaleFactor: 1 });
    const page = await context.newPage();
    await page.goto(`${BASE}/?sale=whatever`);
    await waitTitle(page, 'Open this page from the shop');
    await shot(page, 'no-sign-in');
    await context.close();
  }
  console.log('all checks passed');
} finally {
  await browser.close();
}
