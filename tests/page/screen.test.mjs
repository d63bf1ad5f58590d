// What the page shows for an attempt, without a browser: each state's step and texts, the
// place read out only when it moves, the progress through the line, the turn told once, and
// the endings.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import en from '../../src/api/page/texts-en.js';
import ko from '../../src/api/page/texts-ko.js';
import { money } from '../../src/api/page/i18n.js';
import { describeHold, screenOf } from '../../src/api/page/screen.js';

const texts = (table) => (key, ...values) => {
  const text = table[key];
  return typeof text === 'function' ? text(...values) : text;
};
const t = texts(en);
const won = (amount, currency) => money(amount, currency, 'en');
const seen = (before, firstPosition = null) => ({ before, firstPosition, t, money: won });
const queued = (position, extra = {}) => ({
  attempt_id: 'a1', state: 'QUEUED', position, waiting: 100, estimated_wait_secs: 90, ...extra,
});

test('a place in line: its figures, read out when it moves, and the way through the line', () => {
  const first = screenOf(queued(41), seen(null));
  assert.equal(first.step, 'queued');
  assert.equal(first.texts.position, '41');
  assert.equal(first.texts.waiting, '100');
  assert.equal(first.texts.eta, t('aboutMinutesShort', 2));
  assert.equal(first.say, t('placeSay', 41, t('aboutMinutes', 2)));
  assert.equal(first.firstPosition, 41);
  assert.equal(first.progress, 0);
  // The same place pushed again: nothing read out.
  assert.equal(screenOf(queued(41), seen(queued(41), 41)).say, null);
  // Half way from the first place to the front.
  const half = screenOf(queued(21), seen(queued(41), 41));
  assert.equal(half.progress, 50);
  assert.equal(half.firstPosition, 41);
  // A place further back than the first (the line was redrawn): it is the first now.
  assert.equal(screenOf(queued(60), seen(queued(41), 41)).firstPosition, 60);
});

test('the turn is told once, when it comes after waiting', () => {
  const admitted = { attempt_id: 'a1', state: 'ADMITTED', admission_expires_at: '2026-12-07T10:00:00Z' };
  const turn = screenOf(admitted, seen(queued(1), 41));
  assert.equal(turn.step, 'admitted');
  assert.equal(turn.tellTurn, true);
  assert.deepEqual(turn.countdown, ['admission-countdown', admitted.admission_expires_at]);
  assert.equal(screenOf(admitted, seen(admitted)).tellTurn, false);
  assert.equal(screenOf(admitted, seen(null)).tellTurn, false, 'a page opened on an admission');
});

test('a hold and its payment name what is held and its price', () => {
  const hold = { quantity: 2, amount: 110000, currency: 'KRW', seat_ids: [], expires_at: 'x' };
  assert.equal(describeHold(t, won, hold), `${t('tickets', 2)} · ₩110,000`);
  assert.equal(describeHold(t, won, { quantity: 1, seat_ids: [] }), t('oneTicket'));
  const held = screenOf({ attempt_id: 'a1', state: 'HOLD', hold }, seen(null));
  assert.equal(held.texts['held-what'], t('heldWhat', `${t('tickets', 2)} · ₩110,000`));
  const paying = screenOf({ attempt_id: 'a1', state: 'PAYMENT_PENDING', hold,
    payment: { reference: 'r', expires_at: 'y' } }, seen(null));
  assert.equal(paying.step, 'paying');
  assert.equal(paying.pay, true);
  assert.deepEqual(paying.countdown, ['payment-countdown', 'y']);
});

test('the endings: bought, left, timed out, and sold out while waiting', () => {
  const bought = screenOf({ attempt_id: 'a1', state: 'CONFIRMED', hold: { quantity: 1, seat_ids: [] } }, seen(null));
  assert.deepEqual(bought.done, { good: true, text: t('confirmedText', t('oneTicket')), again: false });
  const left = screenOf({ attempt_id: 'a1', state: 'EXPIRED', reason: 'left' }, seen(null));
  assert.equal(left.title, t('youLeft'));
  assert.equal(left.done.again, true);
  const late = screenOf({ attempt_id: 'a1', state: 'EXPIRED', reason: 'hold_expired' }, seen(null));
  assert.equal(late.title, t('timesUp'));
  const soldOut = screenOf(queued(5, { sold_out: true }), seen(null));
  assert.equal(soldOut.step, 'done');
  assert.equal(soldOut.leave, true);
  assert.equal(soldOut.done.again, false);
});

test('Korean the same way', () => {
  const ko_t = texts(ko);
  const screen = screenOf(queued(3), { before: null, firstPosition: null, t: ko_t, money: won });
  assert.equal(screen.title, ko.inLine);
  assert.match(screen.say, /[\uAC00-\uD7A3]/);
});
