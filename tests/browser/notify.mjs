// "It's your turn" on the waiting page, in headless Chromium with the notification permission
// granted: a waiting user asks once, on a click, to be told; the page says how long the user will
// have to come back; when the turn comes, the page shows a system notification (the
// Notification API, recorded here as the page calls it) and flashes the tab's title. In English,
// then in Korean.
//
//   SLUICE_URL=… SLUICE_ADMIN_KEY=… SLUICE_USER_SECRET=… node notify.mjs

import { call, check, launch, token } from './common.mjs';

const BASE = process.env.SLUICE_URL;
const admin = (method, path, body) => call({ 'X-Admin-Key': process.env.SLUICE_ADMIN_KEY }, method, path, body);

// Every notification the page makes, recorded, then made for real.
const RECORD = () => {
  const Real = window.Notification;
  window.__notifications = [];
  class Recorded extends Real {
    constructor(title, options = {}) {
      super(title, options);
      window.__notifications.push({ title, body: options.body, tag: options.tag });
    }
  }
  window.Notification = Recorded;
};

async function turn(browser, locale, user, words) {
  const sale = (await admin('POST', '/v1/sales', {
    name: `Notify ${locale}`, quantity: 10, per_user_limit: 4, rate_per_minute: 60000,
    max_active: 1000, admission_ttl_secs: 300,
  })).id;
  await admin('POST', `/v1/sales/${sale}/pause`);
  const context = await browser.newContext({ viewport: { width: 390, height: 844 }, locale });
  await context.grantPermissions(['notifications'], { origin: BASE });
  await context.addInitScript(RECORD);
  const page = await context.newPage();
  page.on('pageerror', (e) => { throw new Error(`page error: ${e.message}`); });
  await page.goto(`${BASE}/?sale=${sale}#token=${token(user)}`);
  await page.locator('#join').click();
  await page.locator('#step-queued').waitFor({ state: 'visible', timeout: 20000 });
  const comeBack = await page.locator('#come-back').textContent();
  check(comeBack.includes(words.fiveMinutes), `${locale}: the page says how long there will be to come back: ${comeBack}`);
  const ask = page.getByRole('button', { name: words.notifyMe });
  await ask.waitFor({ state: 'visible' });
  await ask.click();
  await page.locator('#notify-state').filter({ hasText: words.notifyOn }).waitFor({ timeout: 5000 });
  check(await ask.isHidden(), `${locale}: asked once: the button is gone once the user said yes`);
  check(await page.evaluate(() => window.__notifications.length) === 0, `${locale}: nothing shown while waiting`);

  // The turn comes.
  await admin('POST', `/v1/sales/${sale}/resume`);
  await page.locator('#step-admitted').waitFor({ state: 'visible', timeout: 20000 });
  await page.waitForFunction(() => window.__notifications.length > 0, null, { timeout: 5000 });
  const shown = await page.evaluate(() => window.__notifications);
  check(shown.length === 1, `${locale}: one notification (${JSON.stringify(shown)})`);
  check(shown[0].title === words.title, `${locale}: titled "${shown[0].title}"`);
  check(words.body.test(shown[0].body), `${locale}: it says how long to come back: "${shown[0].body}"`);
  const attempt = await page.evaluate((key) => sessionStorage.getItem(key), `sluice.attempt.${sale}`);
  check(shown[0].tag === attempt, `${locale}: tagged with the attempt (a push of the same turn replaces it)`);
  const titles = new Set();
  for (let i = 0; i < 12; i++) {
    titles.add(await page.title());
    await page.waitForTimeout(250);
  }
  check(titles.has(words.flash) && titles.size >= 2, `${locale}: the tab's title flashes: ${[...titles].join(' | ')}`);
  await page.keyboard.press('Shift');
  await page.waitForTimeout(1200);
  check(await page.title() !== words.flash && !(await page.title()).startsWith('▶'), `${locale}: back on the page, the title stops flashing: ${await page.title()}`);
  const status = await call({ Authorization: `Bearer ${token(user)}` }, 'GET', `/v1/attempts/${attempt}`);
  check(status.state === 'ADMITTED', `${locale}: the attempt is ADMITTED`);
  await context.close();
}

const browser = await launch();
try {
  await turn(browser, 'en-US', 'notify-en', {
    fiveMinutes: '5 minutes', notifyMe: "Tell me when it's my turn", notifyOn: 'We will tell you',
    title: "It's your turn", body: /^Come back within (4|5) minutes/, flash: '▶ Your turn!',
  });
  await turn(browser, 'ko-KR', 'notify-ko', {
    fiveMinutes: '5분', notifyMe: '내 차례가 되면 알려 주세요', notifyOn: '차례가 되면 알려 드립니다',
    title: '내 차례입니다', body: /^(4|5)분 안에 돌아와/, flash: '▶ 내 차례입니다!',
  });
  console.log('all checks passed');
} finally {
  await browser.close();
}
