// A whole purchase through the generated client, as a frontend would drive it: an admin
// creates a sale; a user joins, waits as told, is admitted, holds two units, checks out, pays
// in the sandbox and sees the attempt CONFIRMED. Prints each state; exits non-zero on any
// surprise. The test suite runs it against a live sluice (embedded, sandbox on).
//
//   SLUICE_URL=http://127.0.0.1:8080 SLUICE_ADMIN_KEY=… SLUICE_USER_SECRET=… npm run lifecycle

import { createHmac } from "node:crypto";
import { createSluiceClient, pause, type Attempt } from "../src/index";

const base = process.env.SLUICE_URL ?? "http://127.0.0.1:8080";
const adminKey = process.env.SLUICE_ADMIN_KEY ?? "dev-admin-key-change-me";
const userSecret = process.env.SLUICE_USER_SECRET ?? "dev-user-secret-change-me";

/** Stands in for the customer's identity provider: an HS256 user token. */
function userToken(user: string): string {
  const b64 = (v: object) => Buffer.from(JSON.stringify(v)).toString("base64url");
  const head = `${b64({ alg: "HS256", typ: "JWT" })}.${b64({ sub: user, exp: Math.floor(Date.now() / 1000) + 600 })}`;
  return `${head}.${createHmac("sha256", userSecret).update(head).digest("base64url")}`;
}

function fail(message: string, detail?: unknown): never {
  console.error(message, detail === undefined ? "" : JSON.stringify(detail));
  process.exit(1);
}

const admin = createSluiceClient(base, { adminKey });
const created = await admin.POST("/v1/sales", {
  body: {
    name: "TypeScript client sale", quantity: 10, per_user_limit: 4,
    admission_ttl_secs: 60, hold_ttl_secs: 120, payment_ttl_secs: 120,
    rate_per_minute: 6000, max_active: 100, admission_mode: "manual",
  },
});
if (!created.data) fail("createSale failed", created.error);
const sale = created.data.id;

const user = createSluiceClient(base, { userToken: userToken("ts-client-user") });
const joined = await user.POST("/v1/sales/{sale_id}/attempts", { params: { path: { sale_id: sale } } });
if (!joined.data) fail("joinSale failed", joined.error);
const attemptId = joined.data.attempt_id;
console.log(`joined ${joined.data.state} position=${joined.data.position}`);

// The queue ticket of the last answer: sent back, the waiting answer needs no queue-store lookup.
let ticket = joined.data.queue_ticket;

async function current(): Promise<Attempt> {
  const got = await user.GET("/v1/attempts/{attempt_id}", {
    params: { path: { attempt_id: attemptId }, query: { ticket } },
  });
  if (!got.data) fail("getAttempt failed", got.error);
  ticket = got.data.queue_ticket;
  return got.data;
}

async function until(state: Attempt["state"], rounds = 100): Promise<Attempt> {
  for (let i = 0; i < rounds; i++) {
    const attempt = await current();
    if (attempt.state === state) return attempt;
    await pause(Math.min(attempt.poll_after_ms, 250));
  }
  fail(`never reached ${state}`);
}

const admitted = await until("ADMITTED");
console.log(`admitted token=${admitted.admission_token ? "yes" : "no"}`);

// A wrong request is a typed problem: holding without a quantity or seats is refused.
const refused = await user.POST("/v1/attempts/{attempt_id}/hold", {
  params: { path: { attempt_id: attemptId } },
  body: { admission_token: admitted.admission_token! },
});
if (refused.response.status !== 422 || !refused.error?.type) fail("expected a 422 problem", refused.error);
console.log(`refused ${refused.response.status} ${refused.error.type}`);

const held = await user.POST("/v1/attempts/{attempt_id}/hold", {
  params: { path: { attempt_id: attemptId } },
  body: { admission_token: admitted.admission_token!, quantity: 2 },
});
if (!held.data) fail("holdStock failed", held.error);
console.log(`held ${held.data.state} quantity=${held.data.hold?.quantity}`);

const paying = await user.POST("/v1/attempts/{attempt_id}/checkout", { params: { path: { attempt_id: attemptId } } });
if (!paying.data?.payment) fail("checkout failed", paying.error);
console.log(`checkout ${paying.data.state}`);

const paid = await user.POST("/sandbox/payments/{reference}", {
  params: { path: { reference: paying.data.payment.reference } },
  body: { outcome: "approve", delay_ms: 0 },
});
if (!paid.data) fail("payInSandbox failed", paid.error);

const confirmed = await until("CONFIRMED");
console.log(`final ${confirmed.state}`);

const stats = await admin.GET("/v1/sales/{sale_id}/stats", { params: { path: { sale_id: sale } } });
if (stats.data?.confirmed !== 1 || stats.data.remaining !== 8) fail("unexpected stats", stats.data);
console.log(`stats confirmed=${stats.data.confirmed} remaining=${stats.data.remaining}`);
