// A sale in phases on the waiting page, in headless Chromium: the join step shows the phases'
// timeline and, while a phase for holders of access codes runs, a field for the code; a join
// the phase does not let in is told the next phase open to the buyer and its time, a wrong
// code is named as such, and the buyer's code lets them in. In English, then Korean.
//
//   SLUICE_URL=… SLUICE_ADMIN_KEY=… SLUICE_USER_SECRET=… node presale.mjs

import { call, check, launch, token } from './common.mjs';

const BASE = process.env.SLUICE_URL;
const admin = (method, path, body) => call({ 'X-Admin-Key': process.env.SLUICE_ADMIN_KEY }, method, path, body);

async function presale(browser, locale, user, words) {
  const opens = new Date(Date.now() + 3600 * 1000);
  opens.setMilliseconds(0);
  const general = new Date(opens.getTime() + 3600 * 1000);
  const sale = (await admin('POST', '/v1/sales', {
    name: `Presale ${locale}`, quantity: 10, per_user_limit: 2, rate_per_minute: 600, max_active: 100,
    opens_at: opens.toISOString(),
  })).id;
  const phase = (name, at, audience) => ({ name, starts_at: at.toISOString(), audience,
    rate_per_minute: 600, max_active: 100, per_user_limit: 2 });
  await admin('PUT', `/v1/sales/${sale}/phases`, { phases: [phase('Invitations', opens, 'codes'), phase('Everyone', general, 'everyone')] });
  const [code] = (await admin('POST', `/v1/sales/${sale}/phases/0/codes`, { count: 1 })).codes;

  const context = await browser.newContext({ viewport: { width: 390, height: 844 }, locale });
  const page = await context.newPage();
  page.on('pageerror', (e) => { throw new Error(`page error: ${e.message}`); });
  await page.goto(`${BASE}/?sale=${sale}#token=${token(user)}`);
  const note = page.locator('#phases-note');
  await note.waitFor({ state: 'visible' });
  const timeline = await note.textContent();
  check(timeline.includes('Invitations') && timeline.includes('Everyone'), `${locale}: the phases' timeline: ${timeline}`);
  const field = page.getByLabel(words.code);
  check(await field.isVisible(), `${locale}: a field for the access code`);

  await page.locator('#join').click();
  await page.locator('#alert').filter({ hasText: words.later }).waitFor({ timeout: 5000 });
  const told = await page.locator('#alert').textContent();
  // The hour and minute as the page shows them (12-hour clock in both languages).
  const at = /\d{2}:\d{2}/.exec(general.toLocaleTimeString('en-US', { hour: '2-digit', minute: '2-digit' }))[0];
  check(told.includes('Everyone') && told.includes(at), `${locale}: told when the buyer may join: ${told}`);

  await field.fill('WRNG-CODE-9999');
  await page.locator('#join').click();
  await page.locator('#alert').filter({ hasText: words.wrongCode }).waitFor({ timeout: 5000 });
  check(true, `${locale}: a wrong code is named as such`);

  await field.fill(code);
  await page.locator('#join').click();
  await page.locator('#step-queued').waitFor({ state: 'visible', timeout: 10000 });
  check(true, `${locale}: the buyer's code lets them in`);
  await context.close();
}

const browser = await launch();
try {
  await presale(browser, 'en-US', 'presale-en', {
    code: 'Access code', later: 'You can join in', wrongCode: 'not valid',
  });
  await presale(browser, 'ko-KR', 'presale-ko', {
    code: '참여 코드', later: '참여할 수 있습니다', wrongCode: '올바르지 않거나',
  });
  console.log('all checks passed');
} finally {
  await browser.close();
}
