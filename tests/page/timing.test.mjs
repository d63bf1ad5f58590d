// When the page asks again: poll waits and the backoff after busy answers.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { backoff, MIN_POLL_MS, pollDelay } from '../../src/api/page/timing.js';

test('a poll waits what the answer asked, 2 s before any answer, never under the floor', () => {
  assert.equal(pollDelay({ poll_after_ms: 1500 }), 1500);
  assert.equal(pollDelay(null), 2000);
  assert.equal(pollDelay({}), 2000, 'an answer that asks nothing');
  assert.equal(pollDelay({ poll_after_ms: 20 }), MIN_POLL_MS);
});

test('a busy answer is retried after its Retry-After, doubled at each retry, capped at a minute', () => {
  const none = () => 0;
  assert.equal(backoff(2, 0, none), 2000);
  assert.equal(backoff(2, 1, none), 4000);
  assert.equal(backoff(2, 2, none), 8000);
  assert.equal(backoff(0, 0, none), 1000, 'at least a second');
  assert.equal(backoff(45, 3, none), 60000, 'capped');
});

test('the retry is spread over up to as much again, so a crowd does not come back at once', () => {
  assert.equal(backoff(3, 0, () => 0.5), 4500);
  const draws = Array.from({ length: 200 }, () => backoff(1, 1));
  assert.ok(draws.every((ms) => ms >= 2000 && ms < 4000));
  assert.ok(new Set(draws).size > 100, 'drawn, not fixed');
});
