// What the page shows for an attempt, decided apart from the page: a pure function of the
// attempt as sluice answered it, the one shown before and the texts, which the page then draws
// (waiting-room.js `show`). `node --test` covers it (tests/page/screen.test.mjs).
// @ts-check

/** @typedef {import('../../../openapi/typescript/src/schema').components['schemas']} Schemas */
/** @typedef {Schemas['AttemptOut']} AttemptOut */
/** @typedef {Schemas['HoldOut']} HoldOut */
/** @typedef {(key: string, ...values: any[]) => any} Texts */
/** @typedef {(amount: number, currency: string) => string} Money */

/**
 * A step the attempt is on, and what it shows: its title, what is read out (`say`, none when
 * nothing changed), the figures and texts by element id, the countdown to draw, and what the
 * page does besides drawing (`leave`: give a hopeless place up; `tellTurn`: the turn just
 * came; `pay`: show the way to pay). `done` ends the attempt, well (`good`) or not; the page
 * reads an ending out by its title.
 * @typedef {{
 *   step: 'queued' | 'admitted' | 'held' | 'paying' | 'done',
 *   title: string,
 *   say: string | null,
 *   texts: Record<string, string>,
 *   progress?: number,
 *   countdown?: [string, string | null | undefined],
 *   done?: { good: boolean, text: string, again: boolean },
 *   firstPosition: number | null,
 *   leave?: boolean,
 *   tellTurn?: boolean,
 *   pay?: boolean,
 * }} Screen
 */

/**
 * The wait in a few characters, for the figure box.
 * @param {Texts} t
 * @param {number | null | undefined} secs
 */
export function shortWait(t, secs) {
  if (secs == null) return '–';
  return secs < 60 ? t('lessThanMinute') : t('aboutMinutesShort', Math.round(secs / 60));
}

/**
 * The wait in words, as it is read out.
 * @param {Texts} t
 * @param {number | null | undefined} secs
 */
export function minutes(t, secs) {
  if (secs == null) return '–';
  if (secs < 60) return t('underAMinute');
  const m = Math.round(secs / 60);
  return m === 1 ? t('aboutOneMinute') : t('aboutMinutes', m);
}

/**
 * What is held: the seats or the number of tickets, and their price.
 * @param {Texts} t
 * @param {Money} money
 * @param {HoldOut | null | undefined} hold
 */
export function describeHold(t, money, hold) {
  if (!hold) return '';
  const what = hold.seat_ids && hold.seat_ids.length ? t('seats', hold.seat_ids.join(', '))
    : hold.quantity === 1 ? t('oneTicket') : t('tickets', hold.quantity);
  return hold.amount == null || !hold.currency ? what : `${what} · ${money(hold.amount, hold.currency)}`;
}

/**
 * What to show for `next`, given the attempt shown `before` and the first place it had.
 * @param {AttemptOut} next
 * @param {{ before: AttemptOut | null, firstPosition: number | null, t: Texts, money: Money }} seen
 * @returns {Screen}
 */
export function screenOf(next, { before, firstPosition, t, money }) {
  const moved = !before || before.state !== next.state || before.position !== next.position;
  const held = describeHold(t, money, next.hold);
  /** @type {(good: boolean, title: string, text: string, again?: boolean) => Screen} */
  const done = (good, title, text, again = !good) => ({
    step: 'done', title, say: null, texts: {}, firstPosition, done: { good, text, again },
  });
  switch (next.state) {
    case 'QUEUED': {
      // Nothing left and nothing held that could come back: said now, not at the turn, and
      // the place given up.
      if (next.sold_out) return { ...done(false, t('soldOut'), t('soldOutWaiting'), false), leave: true };
      const position = next.position ?? null;
      const first = firstPosition == null || (position != null && position > firstPosition)
        ? position : firstPosition;
      const through = first != null && position != null && first > 1 ? (first - position) / (first - 1) : 0;
      return {
        step: 'queued',
        title: t('inLine'),
        // Read out when the place changes, not on every push of the same figures.
        say: moved ? t('placeSay', next.position, minutes(t, next.estimated_wait_secs)) : null,
        texts: {
          position: String(next.position ?? '–'),
          waiting: String(next.waiting ?? '–'),
          eta: shortWait(t, next.estimated_wait_secs),
        },
        progress: Math.round(through * 100),
        firstPosition: first,
      };
    }
    case 'ADMITTED':
      return {
        step: 'admitted', title: t('yourTurn'), say: t('turnSay'), texts: {}, firstPosition,
        countdown: ['admission-countdown', next.admission_expires_at],
        tellTurn: !!before && before.state === 'QUEUED',
      };
    case 'HOLD':
      return {
        step: 'held', title: t('heldTitle'), say: t('heldSay', held),
        texts: { 'held-what': t('heldWhat', held) }, firstPosition,
        countdown: ['hold-countdown', next.hold && next.hold.expires_at],
      };
    case 'PAYMENT_PENDING':
      return {
        step: 'paying', title: t('payment'), say: t('payingSay'),
        texts: { 'paying-what': t('payingWhat', held.toLowerCase()) }, firstPosition,
        countdown: ['payment-countdown', next.payment && next.payment.expires_at],
        pay: !!next.payment,
      };
    case 'CONFIRMED':
      return done(true, t('confirmed'), t('confirmedText', held));
    default:
      return done(false, next.reason === 'left' ? t('youLeft') : t('timesUp'),
        t('reasons')[next.reason ?? ''] || t('ended'));
  }
}
