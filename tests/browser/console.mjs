// The operator console (/admin) end to end in headless Chromium on a laptop-sized screen: sign
// in with the admin key, find a sale in the list, change its rate and see it take effect in
// the sale's figures and takings, look a buyer up by user id (the purchase with its amount)
// and refund the purchase behind a confirmation;
// then a viewer key sees the sale and the buyer but no control, and a waiting buyer's place in
// the queue; a sale in phases shows its timeline, takes a member list and makes and exports
// access codes; a gate in front of a site is listed and its switch turned (not by a viewer);
// a sale of a venue layout shows its seat map with each section's free, held,
// sold and withdrawn seats, and seats selected by clicks and by a dragged box are withdrawn
// and put back on sale; a Korean browser gets the
// console in Korean. Each page is screenshotted into
// $SHOTS (the Rust test checks the images).
//
//   SLUICE_URL=… SLUICE_ADMIN_KEY=… SLUICE_USER_SECRET=… SHOTS=dir node console.mjs

import { mkdirSync } from 'node:fs';
import { call, check, launch, token } from './common.mjs';

const BASE = process.env.SLUICE_URL;
const ADMIN_KEY = process.env.SLUICE_ADMIN_KEY;
const SHOTS = process.env.SHOTS;
const LAPTOP = { width: 1280, height: 900 };
mkdirSync(SHOTS, { recursive: true });

const admin = (method, path, body) => call({ 'X-Admin-Key': ADMIN_KEY }, method, path, body);
const asUser = (user, method, path, body) =>
  call({ Authorization: `Bearer ${token(user)}` }, method, path, body);

// A buyer who joins, is admitted, holds a unit and pays in the sandbox: CONFIRMED.
async function buy(user, saleId) {
  let attempt = await asUser(user, 'POST', `/v1/sales/${saleId}/attempts`);
  for (let i = 0; i < 100 && attempt.state !== 'ADMITTED'; i++) {
    await new Promise((r) => setTimeout(r, 100));
    attempt = await asUser(user, 'GET', `/v1/attempts/${attempt.attempt_id}`);
  }
  await asUser(user, 'POST', `/v1/attempts/${attempt.attempt_id}/hold`,
    { admission_token: attempt.admission_token, quantity: 1 });
  const paying = await asUser(user, 'POST', `/v1/attempts/${attempt.attempt_id}/checkout`);
  await asUser(user, 'POST', `/sandbox/payments/${paying.payment.reference}`, { outcome: 'approve' });
  return attempt.attempt_id;
}

async function waitText(locator, text, what) {
  for (let i = 0; i < 150; i++) {
    const now = (await locator.textContent().catch(() => '')) || '';
    if (now.includes(text)) return now;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`check failed: ${what}: never showed "${text}"`);
}

const browser = await launch();

async function signedIn(key) {
  const context = await browser.newContext({ viewport: LAPTOP, deviceScaleFactor: 1 });
  const page = await context.newPage();
  page.on('pageerror', (e) => { throw new Error(`page error: ${e.message}`); });
  await page.goto(`${BASE}/admin`);
  await page.getByLabel('Admin key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#sales').waitFor({ state: 'visible' });
  return { page, context };
}

const shot = (page, name) => page.screenshot({ path: `${SHOTS}/${name}.png` });

try {
  const name = 'Autumn tour — Busan';
  const sale = (await admin('POST', '/v1/sales', {
    name, quantity: 5, per_user_limit: 2, rate_per_minute: 60000, max_active: 1000,
    currency: 'KRW', unit_price: 55000,
  })).id;
  await buy('console-buyer', sale);
  await buy('console-other', sale);
  const viewer = (await admin('POST', '/v1/admin/keys', { name: 'support-desk', role: 'viewer' })).secret;
  const gateSale = (await admin('POST', '/v1/sales', { name: 'Friday drop line', quantity: 1 })).id;
  const gate = await admin('POST', '/v1/gates', {
    name: 'shop drop', sale_id: gateSale, hosts: ['shop.example'], paths: ['/drop/'],
  });

  // 1. The operator signs in and finds the sale with its figures.
  {
    const { page, context } = await signedIn(ADMIN_KEY);
    check((await page.locator('#who-name').textContent()).includes('configured (admin)'), 'the console says who is signed in');
    const row = page.locator('#sales-rows tr', { hasText: name });
    await row.waitFor();
    check((await row.locator('td').nth(4).textContent()) === '2', 'the list shows the units sold');
    check(await page.evaluate(() => sessionStorage.getItem('sluice-admin-key') !== null), 'the key is kept in the tab');
    // A gate in front of a site: listed with what it guards, and its switch turned.
    const gateRow = page.locator('#gate-rows tr', { hasText: 'shop drop' });
    await gateRow.waitFor();
    check((await gateRow.locator('td').nth(1).textContent()) === 'shop.example /drop/', 'a gate is listed with what it guards');
    await page.getByLabel('Switch shop drop').selectOption('queue_all');
    await waitText(page.locator('#message'), 'queue everyone', 'the operator turns the gate to queue everyone');
    check((await admin('GET', `/v1/gates/${gate.id}`)).mode === 'queue_all', 'the gate queues everyone');
    await shot(page, 'console-sales');

    // 2. The sale's page: charts, then a rate change that the figures take up.
    await row.getByRole('link', { name }).click();
    await waitText(page.locator('#sale-summary'), 'rate in force 60000/min', 'the sale page shows the rate in force');
    await waitText(page.locator('#sale-summary'), 'sold ₩110,000', 'the sale page shows the takings');
    check(await page.locator('#chart-stock polyline').count() === 4, 'the stock chart draws four series');
    await page.getByLabel('Rate a minute').fill('1234');
    await page.getByRole('button', { name: 'Set admission' }).click();
    await waitText(page.locator('#message'), 'Admission set.', 'the change is confirmed');
    await waitText(page.locator('#sale-summary'), 'rate in force 1234/min', 'the new rate shows in the figures');
    await shot(page, 'console-sale');

    // 3. A buyer looked up by user id; the purchase refunded behind a confirmation.
    await page.getByLabel('User id').fill('console-buyer');
    await page.getByRole('button', { name: 'Look up' }).click();
    await waitText(page.locator('.attempt-state'), 'CONFIRMED · ₩55,000', 'the buyer\'s purchase is found, with its amount');
    check(await page.locator('#attempts td', { hasText: 'PAYMENT_PENDING → CONFIRMED' }).count() === 1, 'its trail is shown');
    page.once('dialog', (d) => { check(d.message().includes('Refund console-buyer'), 'the refund asks first'); d.dismiss(); });
    await page.getByRole('button', { name: 'Refund' }).click();
    check((await page.locator('.attempt-state').textContent()).includes('CONFIRMED'), 'a dismissed confirmation refunds nothing');
    page.once('dialog', (d) => d.accept());
    await page.getByRole('button', { name: 'Refund' }).click();
    await waitText(page.locator('.attempt-state'), 'EXPIRED (refunded)', 'the purchase is refunded');
    const stats = await admin('GET', `/v1/sales/${sale}/stats`);
    check(stats.remaining === 4 && stats.expired.refunded === 1, 'the unit is back on sale');
    await shot(page, 'console-refund');
    await page.getByRole('button', { name: 'Sign out' }).click();
    check(await page.getByLabel('Admin key').isVisible(), 'signing out shows the sign-in again');
    check(await page.evaluate(() => sessionStorage.getItem('sluice-admin-key') === null), 'and forgets the key');
    await context.close();
  }

  // 4. A viewer sees the sale and the buyers, and no control.
  {
    const { page, context } = await signedIn(viewer);
    check((await page.locator('#who-name').textContent()).includes('support-desk (viewer)'), 'the viewer is named');
    await page.locator('#sales-rows a', { hasText: name }).click();
    await waitText(page.locator('#sale-summary'), 'rate in force', 'the viewer sees the figures');
    check(await page.locator('.controls').isHidden(), 'no knobs for a viewer');
    await page.goto(`${BASE}/admin#/`);
    await page.locator('#gate-rows tr').first().waitFor();
    check(await page.getByLabel('Switch shop drop').isDisabled(), 'no gate switch for a viewer');
    check(await page.locator('#end-session').isHidden(), 'nor ending a session');
    await page.locator('#sales-rows a', { hasText: name }).click();
    await waitText(page.locator('#sale-summary'), 'rate in force', 'back on the sale');
    for (const label of ['Pause', 'Resume', 'Close the sale', 'Set admission', 'Add']) {
      check(!(await page.getByRole('button', { name: label, exact: true }).isVisible()), `no ${label} button for a viewer`);
    }
    await page.getByLabel('User id').fill('console-other');
    await page.getByRole('button', { name: 'Look up' }).click();
    await waitText(page.locator('.attempt-state'), 'CONFIRMED', 'the viewer finds a purchase');
    check(await page.getByRole('button', { name: 'Refund' }).count() === 0, 'and no refund button');
    // A buyer still waiting (the sale paused) is found with their place in the queue.
    await admin('POST', `/v1/sales/${sale}/pause`);
    await asUser('console-waiting', 'POST', `/v1/sales/${sale}/attempts`);
    await page.getByLabel('User id').fill('console-waiting');
    await page.getByRole('button', { name: 'Look up' }).click();
    await waitText(page.locator('.attempt-state'), 'QUEUED · waiting: place 1 of 1', 'a waiting buyer\'s place');
    await admin('POST', `/v1/sales/${sale}/resume`);
    await shot(page, 'console-viewer');
    await context.close();
  }
  // 5. A sale in phases: the timeline with each phase's figures; a member list uploaded as a
  // CSV file; access codes generated and exported as a CSV download.
  {
    const opens = new Date(Date.now() + 3600 * 1000);
    opens.setMilliseconds(0);
    const presale = 'Presale in phases';
    const phased = (await admin('POST', '/v1/sales', {
      name: presale, quantity: 50, per_user_limit: 2, rate_per_minute: 600, max_active: 100,
      opens_at: opens.toISOString(),
    })).id;
    const phase = (name, hours, audience) => ({
      name, starts_at: new Date(opens.getTime() + hours * 3600 * 1000).toISOString(), audience,
      rate_per_minute: 600, max_active: 100, per_user_limit: 2,
    });
    await admin('PUT', `/v1/sales/${phased}/phases`, { phases: [
      phase('Fan club', 0, 'list'), phase('Card holders', 1, 'codes'), phase('Everyone', 2, 'everyone')] });
    const { page, context } = await signedIn(ADMIN_KEY);
    await page.goto(`${BASE}/admin#/sales/${phased}`);
    await page.locator('#phases').waitFor({ state: 'visible' });
    const bands = await page.locator('#timeline li').allTextContents();
    check(bands.length === 3 && bands[0].startsWith('Fan club') && bands[2].startsWith('Everyone'),
      `the phases on a timeline: ${bands.join(' | ')}`);
    await page.locator('input.list-upload').setInputFiles({
      name: 'members.csv', mimeType: 'text/csv', buffer: Buffer.from('user_id\nfan-1\nfan-2\nfan-3\n'),
    });
    await waitText(page.locator('#message'), 'List: 3 added, 3 in all.', 'the list is uploaded');
    await waitText(page.locator('#phase-rows'), '3 on the list', 'the phase counts its list');
    await page.getByLabel('Codes').fill('4');
    await page.getByRole('button', { name: 'Generate' }).click();
    await waitText(page.locator('#message'), '4 codes generated.', 'codes are generated');
    await waitText(page.locator('#phase-rows'), '4 codes, 0 redeemed', 'the phase counts its codes');
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Export codes (CSV)' }).click(),
    ]);
    const exported = (await (await download.createReadStream()).toArray()).join('').trim().split('\n');
    check(exported.length === 5 && exported[0] === 'code,max_uses,used' && /^[2-9A-Z]{4}-[2-9A-Z]{4}-[2-9A-Z]{4},1,0$/.test(exported[1]),
      `the codes are exported: ${exported.join(' | ')}`);
    const figures = await page.locator('#phase-rows tr').first().locator('td').allTextContents();
    check(figures[0] === 'Fan club (upcoming)' && figures[3] === '0' && figures[4] === '0' && figures[5] === '0',
      `per phase its state, joined, admitted, bought: ${figures.join(' | ')}`);
    await shot(page, 'console-phases');
    await context.close();
  }
  // 6. A sale of a venue layout: its map, each section's counts, and seats withdrawn and put
  // back on sale by selecting them (clicks, then a dragged box).
  {
    const row = (id, y) => ({ id, seats: Array.from({ length: 6 }, (_, i) => ({ number: String(i + 1), x: 200 + 120 * i, y, category: 'R' })) });
    const layout = (await admin('POST', '/v1/layouts', {
      name: 'Console Hall', stage: { label: 'STAGE', x: 200, y: 0, width: 600, height: 150 },
      sections: [{ id: 'A', name: 'Floor A', rows: [row('1', 300), row('2', 420)] },
        { id: 'B', name: 'Balcony', rows: [row('1', 700)] }],
    })).id;
    const seated = (await admin('POST', '/v1/sales', {
      name: 'Console Hall night', layout_id: layout, per_user_limit: 2, rate_per_minute: 60000, max_active: 100,
    })).id;
    let attempt = await asUser('venue-fan', 'POST', `/v1/sales/${seated}/attempts`);
    for (let i = 0; i < 100 && attempt.state !== 'ADMITTED'; i++) {
      await new Promise((r) => setTimeout(r, 100));
      attempt = await asUser('venue-fan', 'GET', `/v1/attempts/${attempt.attempt_id}`);
    }
    await asUser('venue-fan', 'POST', `/v1/attempts/${attempt.attempt_id}/hold`,
      { admission_token: attempt.admission_token, seat_ids: ['A-1-3', 'A-1-4'] });
    const { page, context } = await signedIn(ADMIN_KEY);
    await page.goto(`${BASE}/admin#/sales/${seated}`);
    await page.locator('#venue-map svg').waitFor({ state: 'visible' });
    const counts = async (n) => (await page.locator('#section-rows tr').nth(n).locator('td').allTextContents()).join(' | ');
    await waitText(page.locator('#section-rows tr').first(), '2', 'the section counts');
    check(await counts(0) === 'Floor A | 10 | 2 | 0 | 0', `Floor A: free, held, sold, withdrawn: ${await counts(0)}`);
    const seatAt = (id) => page.locator(`[data-seat="${id}"]`);
    check((await seatAt('A-1-3').getAttribute('aria-label')).endsWith('held'), 'a held seat is announced so');
    // Two free seats and a held one selected by clicks: the free two are withdrawn.
    for (const id of ['B-1-1', 'B-1-2', 'A-1-3']) await seatAt(id).click();
    await waitText(page.locator('#venue-chosen'), '3 selected', 'three selected');
    await page.getByRole('button', { name: 'Withdraw the free seats selected' }).click();
    await waitText(page.locator('#message'), '2 seats withdrawn.', 'the free seats are withdrawn');
    await waitText(page.locator('#section-rows tr').nth(1), '2', 'the balcony counts them');
    check(await counts(1) === 'Balcony | 4 | 0 | 0 | 2', `Balcony after the withdrawal: ${await counts(1)}`);
    check(await counts(0) === 'Floor A | 10 | 2 | 0 | 0', 'the held seat stays held');
    check(await seatAt('B-1-1').getAttribute('class') === 'off', 'a withdrawn seat is drawn so');
    await seatAt('B-1-1').scrollIntoViewIfNeeded();
    await shot(page, 'console-venue');
    // A box dragged around B-1-1..B-1-3 selects them; the withdrawn two go back on sale.
    await seatAt('B-1-3').scrollIntoViewIfNeeded();
    const first = await seatAt('B-1-1').boundingBox();
    const third = await seatAt('B-1-3').boundingBox();
    await page.mouse.move(first.x - 8, first.y - 8);
    await page.mouse.down();
    await page.mouse.move(third.x + third.width + 8, third.y + third.height + 8, { steps: 5 });
    await page.mouse.up();
    await waitText(page.locator('#venue-chosen'), '3 selected', 'a box selects the seats inside it');
    await page.getByRole('button', { name: 'Put the withdrawn seats selected on sale' }).click();
    await waitText(page.locator('#message'), '2 seats put on sale.', 'the withdrawn seats are back');
    await waitText(page.locator('#section-rows tr').nth(1), '6', 'the balcony is whole again');
    check(await counts(1) === 'Balcony | 6 | 0 | 0 | 0', `Balcony after: ${await counts(1)}`);
    const map = await admin('GET', `/v1/public/sales/${seated}/seat-map`);
    check(map.free === 16 && map.held === 2, `the sale's map agrees: ${map.free} free, ${map.held} held`);
    await context.close();
  }
  // 7. A Korean browser gets the console in Korean.
  {
    const context = await browser.newContext({ viewport: LAPTOP, deviceScaleFactor: 1, locale: 'ko-KR' });
    const page = await context.newPage();
    page.on('pageerror', (e) => { throw new Error(`page error: ${e.message}`); });
    await page.goto(`${BASE}/admin`);
    check(await page.evaluate(() => document.documentElement.lang) === 'ko', 'a Korean browser gets the console in Korean');
    await page.getByLabel('관리자 키').fill(ADMIN_KEY);
    await page.getByRole('button', { name: '로그인' }).click();
    await page.locator('#sales-rows a', { hasText: name }).click();
    await waitText(page.locator('#sale-summary'), '현재 속도 분당 1234', 'the figures speak Korean');
    check(await page.getByRole('button', { name: '일시 정지' }).isVisible(), 'the knobs speak Korean');
    await shot(page, 'console-ko');
    await context.close();
  }
  console.log('all checks passed');
} finally {
  await browser.close();
}
