// Talking to sluice: one call of its API with the user's token (or, for the console, the
// operator's key), and the problem+json answer of a refusal as an error. Its types are the generated ones of the spec
// (openapi/typescript/src/schema.d.ts): `tsc --checkJs` checks this module, the payment
// windows and what they read of an answer against them (tests/page).
// @ts-check

/** @typedef {import('../../../openapi/typescript/src/schema').components['schemas']} Schemas */
/** @typedef {Schemas['AttemptOut']} AttemptOut */
/** @typedef {Schemas['PaymentOut']} PaymentOut */
/** @typedef {Schemas['PayWith']} PayWith */
/** @typedef {Schemas['Problem']} ProblemBody */

/** A refusal: its status, problem type, `Retry-After` (seconds, 0 when none) and body. */
export class Problem extends Error {
  /**
   * @param {number} status
   * @param {Partial<ProblemBody>} body
   * @param {number} retryAfter
   */
  constructor(status, body, retryAfter) {
    super(body.detail || body.title || `HTTP ${status}`);
    this.status = status;
    this.type = body.type || '';
    this.retryAfter = retryAfter;
    this.body = body;
  }
}

/** Whether a refusal is worth trying again after a while: busy (429) or failing (5xx). */
export const isTransient = (/** @type {unknown} */ e) =>
  e instanceof Problem && (e.status === 429 || e.status >= 500);

/**
 * The refusal of a response that is not ok.
 * @param {Response} res
 */
export async function problemOf(res) {
  const json = await res.json().catch(() => ({}));
  return new Problem(res.status, json, Number(res.headers.get('Retry-After') || 0));
}

/**
 * Where sluice's paths are reached: the folder above this module's (`/`, or the path prefix a
 * site's proxy sends to sluice, such as `/.sluice/`, when the page fronts a gate).
 */
const root = typeof location === 'undefined' ? '/' : new URL('../', import.meta.url).pathname;

/**
 * The path of sluice's `path` (`/v1/...`, `/waiting-room/...`) as this page reaches it.
 * @param {string} path
 */
export const at = (path) => `${root}${path.replace(/^\//, '')}`;

/**
 * Calls sluice's API with the headers `credentials` gives at each call (a user's token, an
 * operator's key); its answer (`null` for none), or throws the refusal as a `Problem`.
 * @param {() => Record<string, string>} credentials
 * @returns {(method: string, path: string, body?: object, headers?: Record<string, string>) => Promise<any>}
 */
export function clientWith(credentials) {
  return async (method, path, body, headers = {}) => {
    const res = await fetch(at(path), {
      method,
      headers: {
        ...credentials(),
        ...(body ? { 'Content-Type': 'application/json' } : {}),
        ...headers,
      },
      body: body ? JSON.stringify(body) : undefined,
    });
    if (!res.ok) throw await problemOf(res);
    return res.status === 204 ? null : res.json().catch(() => ({}));
  };
}

/**
 * Calls sluice's API with the user's token ([`clientWith`]): `token`, or what `token()` gives
 * at each call (a gate's visitor has one only once the page entered the gate).
 * @param {string | (() => string | null)} token
 */
export function client(token) {
  return clientWith(() => {
    const t = typeof token === 'function' ? token() : token;
    /** @type {Record<string, string>} */
    const headers = t ? { Authorization: `Bearer ${t}` } : {};
    return headers;
  });
}

/**
 * What the page needs to pay an attempt with: the answer's, or checkout's again (which
 * answers the same payment) when the answer carries none.
 * @param {AttemptOut} next
 * @param {ReturnType<typeof client>} api
 * @returns {Promise<PayWith | undefined>}
 */
export async function payWith(next, api) {
  if (next.payment && next.payment.pay) return next.payment.pay;
  /** @type {AttemptOut} */
  const paying = await api('POST', `/v1/attempts/${next.attempt_id}/checkout`);
  return paying.payment ? paying.payment.pay ?? undefined : undefined;
}
