// Paying with Toss Payments: Toss's payment window (its v2 SDK, `TossPayments(client_key)
// .payment(…).requestPayment(…)`) for the order checkout answered. Toss sends the buyer back
// to sluice's success or fail URL; sluice confirms for the hold's amount and brings the
// buyer back to the page.
// @ts-check

/** @typedef {import('../../../openapi/typescript/src/schema').components['schemas']['TossPay']} TossPay */

/** The payment is taken in Toss's window. */
export const kind = 'window';

/**
 * Opens the window for `pay`. The page is left for Toss's, so nothing is paid here yet.
 * @param {TossPay} pay
 * @param {{ lang: string, loadScript: (url: string) => Promise<void> }} page
 * @returns {Promise<{ paid: boolean, failure?: string }>}
 */
export async function open(pay, { loadScript }) {
  await loadScript(pay.js_url);
  const TossPayments = /** @type {any} */ (window).TossPayments;
  const toss = TossPayments(pay.client_key);
  await toss.payment({ customerKey: TossPayments.ANONYMOUS || 'ANONYMOUS' }).requestPayment({
    method: 'CARD', amount: { currency: pay.currency, value: pay.amount },
    orderId: pay.order_id, orderName: pay.order_name,
    // Paths when sluice has no http.public_url: they are this page's origin's.
    successUrl: new URL(pay.success_url, location.href).href,
    failUrl: new URL(pay.fail_url, location.href).href,
  });
  return { paid: false };
}
