// Spike: a surge of joins at the opening, then everyone polls as told (`poll_after_ms`) until
// admitted. Thresholds: joins and status stay fast and nothing fails under the surge.
//   k6 run -e PEAK=500 k6/spike.js
import { sleep, check } from 'k6';
import exec from 'k6/execution';
import { createSale, join, userToken, waitWhileQueued } from './lib/sluice.js';

const PEAK = Number(__ENV.PEAK || 200);

export const options = {
  scenarios: {
    opening: {
      executor: 'ramping-arrival-rate',
      startRate: 10, timeUnit: '1s', preAllocatedVUs: PEAK, maxVUs: PEAK * 4,
      stages: [
        { target: PEAK, duration: '10s' }, // the doors open
        { target: PEAK, duration: '20s' },
        { target: 0, duration: '10s' },
      ],
    },
  },
  thresholds: {
    http_req_failed: ['rate<0.01'],
    'http_req_duration{name:joinSale}': ['p(99)<250'],
    'http_req_duration{name:getAttempt}': ['p(99)<100'],
    checks: ['rate>0.99'],
  },
};

export function setup() {
  return { sale: createSale({ quantity: 3000, rate_per_minute: 6000, max_active: 100000 }) };
}

export default function ({ sale }) {
  const token = userToken(`spike-${exec.scenario.iterationInTest}`);
  const joined = join(sale, token);
  if (!joined) return;
  const seen = waitWhileQueued(joined.attempt_id, token, 120);
  check(seen, { 'admitted or sold out': (s) => s && s.state !== 'QUEUED' });
  sleep(1);
}
