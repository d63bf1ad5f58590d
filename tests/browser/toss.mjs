// The waiting page, in Korean, takes a buyer through a Toss Payments checkout in headless
// Chromium: the stand-in's SDK (tests/standins/toss, served at the sale's `payment.pay.js_url`)
// opens "Toss's window", which authorizes the payment and sends the browser to sluice's success
// URL; sluice confirms with Toss for the hold's amount and sends the buyer back to the page,
// which says the purchase is complete.
//
//   SLUICE_URL=… SLUICE_ADMIN_KEY=… SLUICE_USER_SECRET=… TOSS_URL=… node toss.mjs

import { call, check, launch, token } from './common.mjs';

const BASE = process.env.SLUICE_URL;
const admin = (method, path, body) => call({ 'X-Admin-Key': process.env.SLUICE_ADMIN_KEY }, method, path, body);

const browser = await launch();
try {
  const sale = (await admin('POST', '/v1/sales', {
    name: '부산 — 첫째 날', quantity: 10, per_user_limit: 4, rate_per_minute: 60000,
    max_active: 1000, currency: 'KRW', unit_price: 55000,
  })).id;
  const context = await browser.newContext({ viewport: { width: 390, height: 844 }, locale: 'ko-KR' });
  const page = await context.newPage();
  const refused = [];
  page.on('console', (m) => { if (/Content Security Policy|Refused to/.test(m.text())) refused.push(m.text()); });
  page.on('pageerror', (e) => { throw new Error(`page error: ${e.message}`); });
  await page.goto(`${BASE}/?sale=${sale}#token=${token('toss-buyer')}`);
  check(await page.getAttribute('html', 'lang') === 'ko', 'the page is in Korean');
  await page.getByRole('button', { name: '대기열에 줄 서기' }).click();
  await page.getByLabel(/몇 장을 구매하시겠어요/).waitFor({ timeout: 20000 });
  await page.getByLabel(/몇 장을 구매하시겠어요/).fill('2');
  await page.locator('#hold').click();
  await page.locator('#held-what').filter({ hasText: '₩110,000' }).waitFor();
  check(true, 'the hold shows its amount: ' + await page.locator('#held-what').textContent());

  await page.getByRole('button', { name: '결제하기' }).click();
  await page.locator('#provider-window').waitFor({ state: 'visible', timeout: 20000 });
  check(await page.locator('#paying-what').filter({ hasText: '₩110,000' }).count() === 1, 'the payment step shows the amount');
  const attempt = await page.evaluate((key) => sessionStorage.getItem(key), `sluice.attempt.${sale}`);
  // "Toss's window" pays and sends the browser to sluice's success URL, then back here.
  await page.getByRole('button', { name: '지금 결제' }).click();
  await page.locator('h1').filter({ hasText: '구매 완료' }).waitFor({ timeout: 20000 }).catch(async () => {
    throw new Error(`not confirmed on the page at ${page.url()}: ${await page.locator('main').innerText()}`);
  });
  check(new URL(page.url()).pathname === '/', `back on the waiting page (${page.url()})`);
  check((await page.locator('#done-text').textContent()).includes('₩110,000'), 'the confirmation says what was paid');
  const status = await call({ Authorization: `Bearer ${token('toss-buyer')}` }, 'GET', `/v1/attempts/${attempt}`);
  check(status.state === 'CONFIRMED', `the attempt is CONFIRMED (${status.state})`);
  check(refused.length === 0, `the page's policy let the SDK run: ${refused.join(' | ')}`);
  console.log('all checks passed');
} finally {
  await browser.close();
}
