// Smoke: a few users buy end to end, one payment fails; every check passes. Run by the test
// suite against a live sluice:  k6 run k6/smoke.js
import { createSale, buy } from './lib/sluice.js';
import exec from 'k6/execution';

export const options = {
  scenarios: {
    smoke: { executor: 'shared-iterations', vus: 2, iterations: 6, maxDuration: '60s' },
  },
  thresholds: {
    checks: ['rate==1.0'],
    http_req_failed: ['rate<0.01'],
    'http_req_duration{name:joinSale}': ['p(95)<500'],
    'http_req_duration{name:getAttempt}': ['p(95)<500'],
    'http_req_duration{name:holdStock}': ['p(95)<1000'],
  },
};

export function setup() {
  return { sale: createSale({ quantity: 100 }) };
}

export default function ({ sale }) {
  const i = exec.scenario.iterationInTest;
  buy(sale, `smoke-${exec.vu.idInTest}-${i}`, { fail: i === 0 });
}
