// Soak: a steady stream of buyers for a long time (default 30 minutes) — memory, pools and the
// outbox must stay flat.   k6 run -e DURATION=2h -e RATE=20 k6/soak.js
import exec from 'k6/execution';
import { buy, createSale } from './lib/sluice.js';

export const options = {
  scenarios: {
    steady: {
      executor: 'constant-arrival-rate', rate: Number(__ENV.RATE || 10), timeUnit: '1s',
      duration: __ENV.DURATION || '30m', preAllocatedVUs: 50, maxVUs: 500,
    },
  },
  thresholds: {
    http_req_failed: ['rate<0.001'],
    'http_req_duration{name:getAttempt}': ['p(99)<100'],
    'http_req_duration{name:holdStock}': ['p(99)<500'],
    checks: ['rate>0.999'],
  },
};

export function setup() {
  return { sale: createSale({ quantity: 1000000, per_user_limit: 1, rate_per_minute: 60000 }) };
}

export default function ({ sale }) {
  buy(sale, `soak-${exec.scenario.iterationInTest}`, { fail: exec.scenario.iterationInTest % 20 === 19 });
}
