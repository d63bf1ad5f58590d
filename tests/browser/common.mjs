// What the browser scripts share: a user's token as the customer's identity provider signs it
// ($SLUICE_USER_SECRET, HS256), a check that logs what it saw, Debian's Chromium, and a call
// of sluice's API.

import { createHmac } from 'node:crypto';
import { chromium } from 'playwright-core';

export function token(user) {
  const b64 = (v) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const head = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64({ sub: user, exp: Math.floor(Date.now() / 1000) + 600 })}`;
  return `${head}.${createHmac('sha256', process.env.SLUICE_USER_SECRET).update(head).digest('base64url')}`;
}

export function check(ok, message) {
  if (!ok) throw new Error(`check failed: ${message}`);
  console.log(`ok - ${message}`);
}

export function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

// sluice's API at $SLUICE_URL with `headers` (a user's token, the admin key): the JSON answer,
// or an error naming the call and its answer.
export async function call(headers, method, path, body) {
  const res = await fetch(`${process.env.SLUICE_URL}${path}`, {
    method,
    headers: { ...headers, 'Content-Type': 'application/json' },
    body: body ? JSON.stringify(body) : undefined,
  });
  const answer = await res.json().catch(() => null);
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(answer)}`);
  return answer;
}
