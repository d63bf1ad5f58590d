// The page's calls of sluice: the token on each, a refusal as a Problem with its Retry-After,
// and what to pay with taken from the answer or from checkout again; the console's calls, with
// the operator's key read at each call.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { client, clientWith, isTransient, payWith, Problem } from '../../src/api/page/api.js';

/** Answers `fetch` with `status` and `body`; the requests it saw. */
function fakeFetch(status, body, headers = {}) {
  const seen = [];
  globalThis.fetch = async (path, init) => {
    seen.push({ path, ...init });
    return new Response(JSON.stringify(body), { status, headers });
  };
  return seen;
}

test('a call carries the token and its JSON body, and answers the JSON', async () => {
  const seen = fakeFetch(200, { state: 'QUEUED' });
  const api = client('tok-1');
  assert.deepEqual(await api('POST', '/v1/sales/s/attempts', { a: 1 }), { state: 'QUEUED' });
  assert.equal(seen[0].headers.Authorization, 'Bearer tok-1');
  assert.equal(seen[0].headers['Content-Type'], 'application/json');
  assert.equal(seen[0].body, '{"a":1}');
});

test('a refusal is a Problem with its type, detail and Retry-After', async () => {
  fakeFetch(429, { type: '/problems/rate-limited', title: 'Too many', detail: 'slow down' },
    { 'Retry-After': '7' });
  const api = client('tok');
  await assert.rejects(api('GET', '/v1/attempts/a'), (e) => {
    assert.ok(e instanceof Problem);
    assert.equal(e.status, 429);
    assert.equal(e.type, '/problems/rate-limited');
    assert.equal(e.message, 'slow down');
    assert.equal(e.retryAfter, 7);
    assert.ok(isTransient(e));
    return true;
  });
  fakeFetch(409, { type: '/problems/sold-out', title: 'Sold out' });
  await assert.rejects(client('tok')('GET', '/x'), (e) => !isTransient(e) && e.message === 'Sold out');
});

test('what to pay with comes from the answer, else from checkout asked again', async () => {
  const pay = { provider: 'sandbox', url: '/sandbox/payments/r' };
  const seen = fakeFetch(200, { payment: { reference: 'r', pay } });
  const api = client('tok');
  assert.deepEqual(await payWith({ attempt_id: 'a1', payment: { reference: 'r', pay } }, api), pay);
  assert.equal(seen.length, 0, 'no call when the answer has it');
  assert.deepEqual(await payWith({ attempt_id: 'a1', payment: { reference: 'r' } }, api), pay);
  assert.equal(seen[0].path, '/v1/attempts/a1/checkout');
  assert.equal(seen[0].method, 'POST');
});

test("the console's calls carry the key it holds at each call, and an empty answer is null", async () => {
  let key = 'sk_admin_1';
  const seen = [];
  globalThis.fetch = async (path, init) => {
    seen.push({ path, ...init });
    return new Response(null, { status: 204 });
  };
  const api = clientWith(() => ({ 'X-Admin-Key': key }));
  assert.equal(await api('DELETE', '/v1/admin/keys/k'), null);
  key = 'sk_admin_2';
  await api('DELETE', '/v1/admin/keys/k');
  assert.deepEqual(seen.map((s) => s.headers['X-Admin-Key']), ['sk_admin_1', 'sk_admin_2']);
  fakeFetch(401, { type: '/problems/unauthorized', title: 'Unauthorized' });
  await assert.rejects(api('GET', '/v1/admin/self'), (e) => e instanceof Problem && e.status === 401);
});
