// A concert hall's seat map on the waiting page, in headless Chromium: a buyer on a phone (in
// English) picks two seats on the map, one by tapping and one by the keyboard, and holds them;
// a second buyer on a desktop (in Korean) sees them turn held within a refresh, is told why
// one cannot be chosen, and chooses another; a third buyer (Korean, on a phone) takes best
// available, offered first, and the second sees the seat they had chosen taken. Screenshots
// of the pages on both screens.
//
//   SLUICE_URL=… SLUICE_ADMIN_KEY=… SLUICE_USER_SECRET=… SHOTS=dir node seatmap.mjs

import { mkdirSync } from 'node:fs';
import { call, check, launch, token } from './common.mjs';

const BASE = process.env.SLUICE_URL;
const SHOTS = process.env.SHOTS;
mkdirSync(SHOTS, { recursive: true });
const admin = (method, path, body) => call({ 'X-Admin-Key': process.env.SLUICE_ADMIN_KEY }, method, path, body);
const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1280, height: 900 };

// Two sections of two rows of eight seats: VIP in front, R behind.
const row = (id, y, category) => ({
  id,
  seats: Array.from({ length: 8 }, (_, i) => ({ number: String(i + 1), x: 200 + 120 * i, y, category })),
});
const layout = (await admin('POST', '/v1/layouts', {
  name: 'Blue Square Hall',
  stage: { label: 'STAGE', x: 200, y: 0, width: 840, height: 200 },
  sections: [
    { id: 'A', name: 'Floor A', rows: [row('1', 400, 'VIP'), row('2', 520, 'VIP')] },
    { id: 'B', name: 'Floor B', rows: [row('1', 760, 'R'), row('2', 880, 'R')] },
  ],
})).id;
const sale = (await admin('POST', '/v1/sales', {
  name: 'Blue Square — night 1', layout_id: layout, per_user_limit: 2, rate_per_minute: 60000,
  max_active: 1000, currency: 'KRW', unit_price: 88000,
  categories: [{ name: 'VIP', unit_price: 154000 }, { name: 'R', unit_price: 121000 }],
})).id;

async function admittedPage(browser, user, locale, viewport) {
  const context = await browser.newContext({ viewport, locale });
  const page = await context.newPage();
  page.on('pageerror', (e) => { throw new Error(`page error: ${e.message}`); });
  await page.goto(`${BASE}/?sale=${sale}#token=${token(user)}`);
  await page.locator('#join').click();
  await page.locator('#seat-map svg').waitFor({ timeout: 20000 });
  return { page, context };
}

const seat = (page, id) => page.locator(`[data-seat="${id}"]`);

const browser = await launch();
try {
  const a = await admittedPage(browser, 'map-buyer-en', 'en-US', PHONE);
  const b = await admittedPage(browser, 'map-buyer-ko', 'ko-KR', DESKTOP);

  // A picks A-1-4 by tapping and A-1-5 from the keyboard: each is announced with its
  // section, row, number, price and state.
  const four = seat(a.page, 'A-1-4');
  const announced = await four.getAttribute('aria-label');
  check(announced === 'Floor A, row 1, seat 4, ₩154,000, free', `a seat is announced whole: ${announced}`);
  await four.click();
  check(await four.getAttribute('aria-checked') === 'true', 'a tap chooses a seat');
  await seat(a.page, 'A-1-5').focus();
  await a.page.keyboard.press('Space');
  check(await seat(a.page, 'A-1-5').getAttribute('aria-checked') === 'true', 'Space chooses the focused seat');
  await seat(a.page, 'A-1-6').click();
  check((await a.page.locator('#seat-why').textContent()).includes('up to 2 seats'), 'a third seat is refused with the limit');
  await a.page.screenshot({ path: `${SHOTS}/seat-map-en-phone.png` });
  await a.page.locator('#hold').click();
  await a.page.locator('#held-what').filter({ hasText: 'A-1-4' }).waitFor({ timeout: 10000 });
  check((await a.page.locator('#held-what').textContent()).includes('₩308,000'), 'the hold is the two VIP seats\' price');

  // B sees them held within a refresh, is told why one cannot be chosen, and chooses another.
  await b.page.waitForFunction(() => document.querySelector('[data-seat="A-1-4"]').getAttribute('class').startsWith('held'),
    null, { timeout: 5000 });
  check((await seat(b.page, 'A-1-4').getAttribute('aria-label')).includes('다른 분이 확보 중'), 'the held seat is announced so, in Korean');
  // (aria-disabled: a test tool will not tap it unless forced; a finger does.)
  await seat(b.page, 'A-1-4').click({ force: true });
  check((await b.page.locator('#seat-why').textContent()).includes('다른 분이 확보한 좌석'), 'why it cannot be chosen');
  await seat(b.page, 'B-1-2').click();
  check(await seat(b.page, 'B-1-2').getAttribute('aria-checked') === 'true', 'another seat is chosen');
  await b.page.screenshot({ path: `${SHOTS}/seat-map-ko-desktop.png` });
  await b.page.setViewportSize(PHONE);
  await b.page.screenshot({ path: `${SHOTS}/seat-map-ko-phone.png` });
  await a.page.setViewportSize(DESKTOP);
  await a.page.screenshot({ path: `${SHOTS}/seat-map-en-desktop.png` });

  // C is offered best available before the map, asks for 2 together in R, and gets the two
  // R seats nearest the stage at once; B is told the seat they had chosen was just taken.
  const c = await admittedPage(browser, 'map-buyer-best', 'ko-KR', PHONE);
  check(await c.page.evaluate(() => Boolean(document.getElementById('best-box')
    .compareDocumentPosition(document.getElementById('seat-map')) & Node.DOCUMENT_POSITION_FOLLOWING)),
  'best available comes before the map');
  check(await c.page.locator('#best-hold').textContent() === '가장 좋은 좌석 나란히 확보', 'offered in Korean');
  await c.page.locator('#best-category').selectOption('R');
  check((await c.page.locator('#best-category option:checked').textContent()) === 'R · ₩121,000', 'a category with its price');
  await c.page.locator('#best-count').fill('2');
  await c.page.screenshot({ path: `${SHOTS}/best-available-ko-phone.png` });
  await c.page.locator('#best-hold').click();
  await c.page.locator('#held-what').filter({ hasText: 'B-1-1' }).waitFor({ timeout: 10000 });
  const held = await c.page.locator('#held-what').textContent();
  check(held.includes('B-1-2') && held.includes('₩242,000'), `two R seats together: ${held}`);
  await b.page.waitForFunction(() => document.getElementById('seat-why').textContent.includes('B-1-2'),
    null, { timeout: 5000 });
  check(await seat(b.page, 'B-1-2').getAttribute('aria-checked') === 'false', 'the seat taken is no longer chosen');
  await c.context.close();
  await a.context.close();
  await b.context.close();
  console.log('all checks passed');
} finally {
  await browser.close();
}
