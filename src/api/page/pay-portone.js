// Paying with PortOne (V2): PortOne's window (`PortOne.requestPayment`) into the store,
// through the channel, for the payment checkout answered. It answers here; PortOne reports
// the payment to sluice by its webhook.
// @ts-check

/** @typedef {import('../../../openapi/typescript/src/schema').components['schemas']['PortOnePay']} PortOnePay */

/** The payment is taken in PortOne's window. */
export const kind = 'window';

/**
 * Opens the window for `pay`: paid, or the failure PortOne answered (`code: message`).
 * @param {PortOnePay} pay
 * @param {{ lang: string, loadScript: (url: string) => Promise<void> }} page
 * @returns {Promise<{ paid: boolean, failure?: string }>}
 */
export async function open(pay, { lang, loadScript }) {
  await loadScript(pay.js_url);
  const result = await /** @type {any} */ (window).PortOne.requestPayment({
    storeId: pay.store_id, channelKey: pay.channel_key, paymentId: pay.payment_id,
    orderName: pay.order_name, totalAmount: pay.amount, currency: `CURRENCY_${pay.currency}`,
    payMethod: 'CARD', locale: lang === 'ko' ? 'KO_KR' : 'EN_US',
  });
  if (result && result.code) return { paid: false, failure: `${result.code}: ${result.message || ''}` };
  return { paid: true };
}
