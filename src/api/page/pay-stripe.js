// Paying with Stripe on the waiting page: Stripe's Payment Element, mounted in the page's
// payment form with the PaymentIntent's client secret that checkout answered. Where Stripe.js
// has no Payment Element (a test double's), its card element.
// @ts-check

/** @typedef {import('../../../openapi/typescript/src/schema').components['schemas']['StripePay']} StripePay */

/** The payment is taken in a form on the page, not in a window of Stripe's. */
export const kind = 'form';

/**
 * Mounts the form for `pay` in `slot`; resolves to the function that confirms the payment
 * with what the buyer entered (its result has `error` when Stripe refused it).
 * @param {StripePay} pay
 * @param {HTMLElement} slot
 * @param {{ lang: string, loadScript: (url: string) => Promise<void> }} page
 * @returns {Promise<() => Promise<{ error?: { message?: string } }>>}
 */
export async function mount(pay, slot, { lang, loadScript }) {
  await loadScript(pay.js_url);
  const stripe = /** @type {any} */ (window).Stripe(pay.publishable_key);
  slot.replaceChildren();
  if (typeof stripe.confirmPayment === 'function') {
    const elements = stripe.elements({ clientSecret: pay.client_secret, locale: lang });
    elements.create('payment').mount(slot);
    return () => stripe.confirmPayment({
      elements, redirect: 'if_required', confirmParams: { return_url: location.href },
    });
  }
  const card = stripe.elements().create('card');
  card.mount(slot);
  return () => stripe.confirmCardPayment(pay.client_secret, { payment_method: { card } });
}

/** The key of a mounted form: a second answer for the same payment mounts nothing again. */
export const formKey = (/** @type {StripePay} */ pay) => pay.client_secret;
