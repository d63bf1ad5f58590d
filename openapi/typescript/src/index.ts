// The sluice client for frontends: openapi-fetch over the types generated from the committed
// spec (`npm run generate` rewrites src/schema.d.ts; the test suite fails when it is stale).
// Every path, body, status and error is typed; errors are RFC 9457 problem+json.

import createClient, { type Client, type Middleware } from "openapi-fetch";
import type { components, paths } from "./schema";

export type { components, paths };
export type Attempt = components["schemas"]["AttemptOut"];
export type Problem = components["schemas"]["Problem"];
/** Support and operations (admin key): pages of sales and attempts, and an attempt's file. */
export type SalePage = components["schemas"]["SalePage"];
export type AttemptPage = components["schemas"]["AttemptPage"];
export type AttemptFile = components["schemas"]["AttemptFileOut"];
/** Operators (admin keys): named keys with a role, and the admin audit log. */
export type Role = components["schemas"]["RoleName"];
export type AdminKey = components["schemas"]["AdminKeyOut"];
export type CreatedAdminKey = components["schemas"]["CreatedAdminKey"];
export type AdminActionPage = components["schemas"]["AdminActionPage"];
/** A running sale's stock and details (operator keys). */
export type StockChange = components["schemas"]["StockChangeIn"];
export type SaleUpdate = components["schemas"]["UpdateSale"];
export type SaleFigures = components["schemas"]["SaleFiguresOut"];

export interface Credentials {
  /** The user's JWT from your identity provider (Authorization: Bearer). */
  userToken?: string;
  /** An admin key (X-Admin-Key: the configured one, or a named key with a role), for
   * back-office code only — never in a page a buyer loads. */
  adminKey?: string;
}

export function createSluiceClient(baseUrl: string, credentials: Credentials = {}): Client<paths> {
  const client = createClient<paths>({ baseUrl });
  const auth: Middleware = {
    onRequest({ request }) {
      if (credentials.userToken) {
        request.headers.set("Authorization", `Bearer ${credentials.userToken}`);
      }
      if (credentials.adminKey) {
        request.headers.set("X-Admin-Key", credentials.adminKey);
      }
      return request;
    },
  };
  client.use(auth);
  return client;
}

/** Waits as the server asks (`poll_after_ms`), never faster. */
export function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
