// The waiting page pays a Stripe sale in headless Chromium, through localstripe's Stripe.js
// (served by the localstripe the Rust test runs, at the sale's `payment.pay.js_url`): the
// held step shows the amount, checkout mounts Stripe's card form from Stripe.js under the
// page's policy, and the buyer's payment confirms the attempt on the page.
//
// localstripe's Stripe.js has no Payment Element and does not read the card typed into its
// form: its `confirmCardPayment` only completes a 3-D Secure authentication. So this script,
// standing in for the card network, attaches a card that asks for authentication to the
// intent with the shop's secret key (what real Stripe.js does with the card typed), and the
// buyer's click on "Pay now" then completes the payment through Stripe.js.
//
//   SLUICE_URL=… SLUICE_ADMIN_KEY=… SLUICE_USER_SECRET=… STRIPE_URL=… STRIPE_SECRET_KEY=… node stripe.mjs

import { call, check, launch, token } from './common.mjs';

const BASE = process.env.SLUICE_URL;
const STRIPE = process.env.STRIPE_URL;
const SECRET = process.env.STRIPE_SECRET_KEY;

const admin = (method, path, body) => call({ 'X-Admin-Key': process.env.SLUICE_ADMIN_KEY }, method, path, body);

// Stripe's API with the shop's secret key.
async function stripe(path, form) {
  const res = await fetch(`${STRIPE}${path}`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${SECRET}`, 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form),
  });
  return { status: res.status, body: await res.json() };
}

const browser = await launch();
try {
  const sale = (await admin('POST', '/v1/sales', {
    name: 'Busan — Night 1', quantity: 10, per_user_limit: 4, rate_per_minute: 60000,
    max_active: 1000, currency: 'KRW', unit_price: 55000,
  })).id;
  const context = await browser.newContext({ viewport: { width: 390, height: 844 } });
  const page = await context.newPage();
  const refused = [];
  page.on('console', (m) => { if (/Content Security Policy|Refused to/.test(m.text())) refused.push(m.text()); });
  page.on('pageerror', (e) => { throw new Error(`page error: ${e.message}`); });
  await page.goto(`${BASE}/?sale=${sale}#token=${token('stripe-buyer')}`);
  await page.getByRole('button', { name: 'Join the queue' }).click();
  await page.getByLabel(/How many tickets/).waitFor({ timeout: 20000 });
  await page.getByLabel(/How many tickets/).fill('2');
  await page.locator("#hold").click();
  await page.locator('#held-what').filter({ hasText: '₩110,000' }).waitFor();
  check(true, 'the hold shows its amount: ' + await page.locator('#held-what').textContent());

  await page.getByRole('button', { name: 'Go to payment' }).click();
  // Stripe.js (localstripe's) is loaded from the sale's js_url and mounts its card form.
  const number = page.locator('#pay-form-element input[placeholder="number"]');
  await number.waitFor({ timeout: 20000 });
  check(await page.locator('#paying-what').filter({ hasText: '₩110,000' }).count() === 1, 'the payment step shows the amount');
  await number.fill('4000002760003184');
  await page.locator('#pay-form-element input[placeholder="exp_month"]').fill('12');
  await page.locator('#pay-form-element input[placeholder="exp_year"]').fill('34');
  await page.locator('#pay-form-element input[placeholder="cvc"]').fill('123');

  // The card network's part (see the top): the card on the intent, asking for authentication.
  const attempt = await page.evaluate((key) => sessionStorage.getItem(key), `sluice.attempt.${sale}`);
  const paying = await call({ Authorization: `Bearer ${token('stripe-buyer')}` }, 'POST', `/v1/attempts/${attempt}/checkout`);
  const intent = paying.payment.pay.client_secret.split('_secret_')[0];
  const method = await stripe('/v1/payment_methods', {
    type: 'card', 'card[number]': '4000002760003184', 'card[exp_month]': '12', 'card[exp_year]': '2034', 'card[cvc]': '123',
  });
  await stripe(`/v1/payment_intents/${intent}`, { payment_method: method.body.id });
  const confirmed = await stripe(`/v1/payment_intents/${intent}/confirm`, {});
  check(confirmed.body.status === 'requires_action', `the card asks for authentication (${confirmed.body.status})`);

  await page.getByRole('button', { name: 'Pay now' }).click();
  await page.getByRole('button', { name: 'Complete authentication' }).click();
  await page.locator('h1').filter({ hasText: 'Confirmed' }).waitFor({ timeout: 20000 });
  check((await page.locator('#done-text').textContent()).includes('₩110,000'), 'the confirmation says what was paid');
  check(refused.length === 0, `the page's policy let Stripe.js run: ${refused.join(' | ')}`);
  console.log('all checks passed');
} finally {
  await browser.close();
}
