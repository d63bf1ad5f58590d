// Full lifecycle under load: users join, are admitted, hold, check out and the provider's
// webhook settles each payment (one in ten fails). Nothing oversells: at the end, confirmed
// units never exceed the stock.   k6 run -e USERS=300 -e STOCK=200 k6/lifecycle.js
import http from 'k6/http';
import { check } from 'k6';
import exec from 'k6/execution';
import { BASE, buy, createSale } from './lib/sluice.js';

const USERS = Number(__ENV.USERS || 100);
const STOCK = Number(__ENV.STOCK || 80);

export const options = {
  scenarios: {
    buyers: { executor: 'shared-iterations', vus: 20, iterations: USERS, maxDuration: '5m' },
  },
  thresholds: {
    http_req_failed: ['rate<0.01'],
    'http_req_duration{name:holdStock}': ['p(95)<500'],
    'http_req_duration{name:receivePaymentWebhook}': ['p(95)<500'],
    checks: ['rate>0.99'],
  },
};

export function setup() {
  return { sale: createSale({ quantity: STOCK, per_user_limit: 1, rate_per_minute: 60000 }) };
}

export default function ({ sale }) {
  const i = exec.scenario.iterationInTest;
  buy(sale, `buyer-${i}`, { fail: i % 10 === 9 });
}

export function teardown({ sale }) {
  const stats = http.get(`${BASE}/v1/sales/${sale}/stats`, {
    headers: { 'X-Admin-Key': __ENV.SLUICE_ADMIN_KEY || 'dev-admin-key-change-me' },
  }).json();
  check(stats, { 'never oversold': (s) => s.confirmed <= STOCK && s.remaining >= 0 });
}
