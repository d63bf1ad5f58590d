// Shared helpers of the k6 scripts: configuration from the environment, user tokens (HS256,
// minted here as the customer's identity provider would), signed payment webhooks, and the
// client side of the waiting room, as a real client behaves: polling that honours
// `poll_after_ms`, and every call retried after a 429 or 503 as its `Retry-After` says (with
// jitter, so retries do not arrive together), counted as failed only when it fails for good.
//
//   SLUICE_URL            http://127.0.0.1:8080
//   SLUICE_ADMIN_KEY      the X-Admin-Key
//   SLUICE_USER_SECRET    auth.user_jwt_hs256_secret
//   SLUICE_WEBHOOK_SECRET payments.webhook_secret
//   SLUICE_FORWARDED_FOR  1: each user sends an X-Forwarded-For address of its own, so the
//                         per-IP limits see as many clients as there are users (sluice must
//                         trust the header: http.trust_forwarded_for = true); see k6/README.md
//   SLUICE_RETRIES        how many times a call is retried after a 429 or 503 (default 5)
// Defaults are config/dev.toml's public development values.

import http from 'k6/http';
import crypto from 'k6/crypto';
import encoding from 'k6/encoding';
import { check, sleep } from 'k6';

export const BASE = __ENV.SLUICE_URL || 'http://127.0.0.1:8080';
const ADMIN_KEY = __ENV.SLUICE_ADMIN_KEY || 'dev-admin-key-change-me';
const USER_SECRET = __ENV.SLUICE_USER_SECRET || 'dev-user-secret-change-me';
const WEBHOOK_SECRET = __ENV.SLUICE_WEBHOOK_SECRET || 'dev-webhook-secret-change-me';

const FORWARDED_FOR = __ENV.SLUICE_FORWARDED_FOR === '1';
const RETRIES = Number(__ENV.SLUICE_RETRIES || 5);

/// Operation ids as request tags, so k6's figures line up with sluice's `operation` label.
const tagged = (name) => ({ tags: { name } });

/// A 429 or 503 asks the client to come back later: not a failure yet.
const RETRY_LATER = [429, 503];
const notYetFailed = http.expectedStatuses({ min: 200, max: 399 }, ...RETRY_LATER);

/// Calls `send(params)` until it answers something other than 429 or 503, waiting what
/// `Retry-After` says (1 s when absent) plus up to half of it again as jitter, at most
/// `SLUICE_RETRIES` times. The tries before the last do not count in `http_req_failed`; the
/// last one does, if it still fails.
export function withRetries(params, send) {
  for (let attempt = 0; ; attempt++) {
    const last = attempt >= RETRIES;
    const res = send(last ? params : { ...params, responseCallback: notYetFailed });
    if (last || !RETRY_LATER.includes(res.status)) return res;
    const after = Number(res.headers['Retry-After'] || 1);
    sleep(after * (1 + Math.random() / 2));
  }
}

/// A client address of the token's own (for the per-IP limits): 10.x.y.z from its hash. It is
/// only a header value, never an address anything is sent to.
function forwardedFor(token) {
  let h = 0;
  for (let i = 0; i < token.length; i++) h = (h * 31 + token.charCodeAt(i)) >>> 0;
  return `10.${(h >>> 16) & 255}.${(h >>> 8) & 255}.${h & 255}`;
}

function b64url(text) {
  return encoding.b64encode(text, 'rawurl');
}

/// A user token for `user`, valid for an hour.
export function userToken(user) {
  const header = b64url(JSON.stringify({ alg: 'HS256', typ: 'JWT' }));
  const claims = b64url(JSON.stringify({ sub: user, exp: Math.floor(Date.now() / 1000) + 3600 }));
  const signature = crypto.hmac('sha256', USER_SECRET, `${header}.${claims}`, 'base64rawurl');
  return `${header}.${claims}.${signature}`;
}

/// A user's request: its token, and with SLUICE_FORWARDED_FOR its own client address.
function asUser(token, extra = {}) {
  const headers = { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' };
  if (FORWARDED_FOR) headers['X-Forwarded-For'] = forwardedFor(token);
  return { headers, ...extra };
}

/// Creates a sale (admin); returns its id.
export function createSale(overrides = {}) {
  const body = {
    name: 'k6 sale', quantity: 1000, per_user_limit: 4, rate_per_minute: 60000, max_active: 10000,
    admission_ttl_secs: 120, hold_ttl_secs: 300, payment_ttl_secs: 600, ...overrides,
  };
  const res = http.post(`${BASE}/v1/sales`, JSON.stringify(body), {
    headers: { 'X-Admin-Key': ADMIN_KEY, 'Content-Type': 'application/json' }, ...tagged('createSale'),
  });
  check(res, { 'sale created': (r) => r.status === 201 });
  return res.json('id');
}

export function join(sale, token) {
  const res = withRetries(asUser(token, tagged('joinSale')), (p) =>
    http.post(`${BASE}/v1/sales/${sale}/attempts`, null, p));
  check(res, { 'joined (202)': (r) => r.status === 202 });
  return res.status === 202 ? res.json() : null;
}

/// An attempt's status; with the `queue_ticket` of its last answer, a waiting attempt is
/// answered from the replica's view of the queue (no queue-store lookup), as clients should.
export function status(attempt, token, ticket) {
  const query = ticket ? `?ticket=${encodeURIComponent(ticket)}` : '';
  return withRetries(asUser(token, tagged('getAttempt')), (p) =>
    http.get(`${BASE}/v1/attempts/${attempt}${query}`, p));
}

/// Polls until the attempt leaves QUEUED (or `deadlineSecs` pass), sleeping what the server
/// asks (`poll_after_ms`) — the behaviour sluice's rate limits and ETA assume of clients.
export function waitWhileQueued(attempt, token, deadlineSecs = 60) {
  const until = Date.now() + deadlineSecs * 1000;
  let current = null;
  while (Date.now() < until) {
    const res = status(attempt, token, current && current.queue_ticket);
    if (res.status !== 200) return current;
    current = res.json();
    if (current.state !== 'QUEUED') return current;
    sleep(Math.min(current.poll_after_ms, 5000) / 1000);
  }
  return current;
}

export function hold(attempt, token, admissionToken, quantity) {
  const body = JSON.stringify({ admission_token: admissionToken, quantity });
  const res = withRetries(asUser(token, tagged('holdStock')), (p) =>
    http.post(`${BASE}/v1/attempts/${attempt}/hold`, body, p));
  check(res, { 'held (200) or sold out (409)': (r) => r.status === 200 || r.status === 409 });
  return res;
}

export function checkout(attempt, token) {
  const res = withRetries(asUser(token, tagged('checkout')), (p) =>
    http.post(`${BASE}/v1/attempts/${attempt}/checkout`, null, p));
  check(res, { 'checked out (200)': (r) => r.status === 200 });
  return res.status === 200 ? res.json() : null;
}

/// Posts the payment provider's signed webhook.
export function paymentWebhook(eventId, type, reference) {
  const body = JSON.stringify({ id: eventId, type, payment_reference: reference });
  const t = Math.floor(Date.now() / 1000);
  const v1 = crypto.hmac('sha256', WEBHOOK_SECRET, `${t}.${body}`, 'hex');
  const params = {
    headers: { 'Sluice-Signature': `t=${t},v1=${v1}`, 'Content-Type': 'application/json' },
    ...tagged('receivePaymentWebhook'),
  };
  const res = withRetries(params, (p) => http.post(`${BASE}/v1/webhooks/payments`, body, p));
  check(res, { 'webhook accepted (200)': (r) => r.status === 200 });
  return res;
}

/// One user's whole way: join, wait, hold, check out, pay (or fail to); returns the final
/// state. `fail` makes the provider report a failed payment.
export function buy(sale, user, { quantity = 1, fail = false } = {}) {
  const token = userToken(user);
  const joined = join(sale, token);
  if (!joined) return null;
  const admitted = waitWhileQueued(joined.attempt_id, token);
  if (!admitted || admitted.state !== 'ADMITTED') return admitted && admitted.state;
  const held = hold(joined.attempt_id, token, admitted.admission_token, quantity);
  if (held.status !== 200) return 'SOLD_OUT';
  const paying = checkout(joined.attempt_id, token);
  if (!paying) return null;
  const type = fail ? 'payment.failed' : 'payment.succeeded';
  paymentWebhook(`k6-${user}-${Date.now()}`, type, paying.payment.reference);
  const final = status(joined.attempt_id, token).json();
  check(final, {
    'ends CONFIRMED or EXPIRED': (s) => s.state === (fail ? 'EXPIRED' : 'CONFIRMED'),
  });
  return final.state;
}
