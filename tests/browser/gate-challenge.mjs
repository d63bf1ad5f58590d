// A visitor meets the gate's Turnstile challenge on the waiting page, in headless Chromium
// through nginx: the widget (the stand-in's script, rendered explicitly) is shown before the
// line, and once passed the visitor is in line. $SHOTS/gate-challenge.png shows the challenge.
//
//   SITE_URL=… GATE_ID=… SHOTS=dir node gate-challenge.mjs

import { mkdirSync } from 'node:fs';
import { check, launch } from './common.mjs';

const SITE = process.env.SITE_URL;
const SHOTS = process.env.SHOTS;
mkdirSync(SHOTS, { recursive: true });

const browser = await launch();
const context = await browser.newContext({ locale: 'en-GB', viewport: { width: 390, height: 844 } });
const page = await context.newPage();
await page.goto(`${SITE}/shop/drop?item=7`);
check(page.url().includes(`/.sluice/?gate=${process.env.GATE_ID}`), 'on the waiting page');
await page.waitForSelector('#step-challenge:not([hidden])', { timeout: 15000 });
check(await page.locator('#step-queued').isHidden(), 'not in line before the challenge');
const verify = page.getByRole('button', { name: 'Verify you are human' });
await verify.waitFor();
await page.screenshot({ path: `${SHOTS}/gate-challenge.png` });
await verify.click();
await page.waitForSelector('#step-queued:not([hidden])', { timeout: 15000 });
check(true, 'in line once the challenge is passed');
const cookies = await context.cookies();
check(cookies.some((c) => c.name === 'sluice_visitor' && c.httpOnly), 'a visitor cookie, HttpOnly');
await browser.close();
console.log('all checks passed');
