// When the page asks again: the wait between polls of the status while its stream is down, and
// the backoff after a busy answer. Pure, so `node --test` checks them (tests/page).
// @ts-check

/** The least wait between two polls (ms), whatever the answer asks. */
export const MIN_POLL_MS = 500;

/**
 * How long to wait (ms) before the next poll: what the last answer asked (`poll_after_ms`),
 * 2 s before any, never under `MIN_POLL_MS`.
 * @param {{ poll_after_ms?: number } | null} last
 */
export function pollDelay(last) {
  const asked = last && last.poll_after_ms != null ? last.poll_after_ms : 2000;
  return Math.max(MIN_POLL_MS, asked);
}

/**
 * How long to wait (ms) before the `attemptNo`-th retry of a busy answer: at least its
 * Retry-After (seconds, at least 1), doubled at each retry, and up to as much again drawn at
 * random, so a crowd turned away at once does not come back at once (capped at a minute).
 * @param {number} retryAfter
 * @param {number} attemptNo
 * @param {() => number} [random] a draw in [0, 1)
 */
export function backoff(retryAfter, attemptNo, random = Math.random) {
  const floor = Math.min(60, Math.max(1, retryAfter) * 2 ** attemptNo) * 1000;
  return floor + random() * floor;
}
