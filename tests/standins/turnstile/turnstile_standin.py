"""Cloudflare Turnstile's siteverify on loopback, for the gate's tests (Cloudflare publishes no
stand-in of its own).

  python3 turnstile_standin.py <port>

Written from Cloudflare's reference:
- POST /turnstile/v0/siteverify follows "Server-side validation"
  (https://developers.cloudflare.com/turnstile/get-started/server-side-validation/): a form
  (or JSON) body with `secret`, `response`, optional `remoteip` and `idempotency_key`; the
  answer is JSON with `success`, `error-codes`, and on success `challenge_ts` and `hostname`.
- The secrets follow "Testing" (https://developers.cloudflare.com/turnstile/troubleshooting/testing/):
  1x0000000000000000000000000000000AA always passes, 2x0000000000000000000000000000000AA always
  fails, 3x0000000000000000000000000000000AA answers "token already spent"; test secrets accept
  only the dummy token XXXX.DUMMY.TOKEN.XXXX. Any other secret is `invalid-input-secret`.
- GET /turnstile/v0/api.js is the widget's script, rendered explicitly as "Client-side
  rendering" describes (https://developers.cloudflare.com/turnstile/get-started/client-side-rendering/):
  `turnstile.render(container, {sitekey, callback, 'error-callback'})`. It shows the interactive
  challenge the test site key 3x00000000000000000000FF forces, a button; a click calls `callback`
  with the dummy token, or `error-callback` for the always-blocking site keys (2x…).
- GET /_test/calls: what arrived, for the tests ([{"secret", "response", "remoteip"}]).
"""

import json
import os
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from standin import JsonHandler, serve  # noqa: E402

PASSES = "1x0000000000000000000000000000000AA"
FAILS = "2x0000000000000000000000000000000AA"
SPENT = "3x0000000000000000000000000000000AA"
DUMMY_TOKEN = "XXXX.DUMMY.TOKEN.XXXX"

WIDGET = b"""
window.turnstile = {
  render(container, params) {
    const el = typeof container === 'string' ? document.querySelector(container) : container;
    const button = document.createElement('button');
    button.type = 'button';
    button.textContent = 'Verify you are human';
    button.onclick = () => {
      button.remove();
      if (params.sitekey.startsWith('2x')) params['error-callback'] && params['error-callback']('110100');
      else params.callback('XXXX.DUMMY.TOKEN.XXXX');
    };
    el.append(button);
    return 'standin-widget';
  },
};
"""

lock = threading.Lock()
calls = []


class Handler(JsonHandler):
    def form(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if (self.headers.get("Content-Type") or "").startswith("application/json"):
            return json.loads(raw or b"{}")
        return {k: v[0] for k, v in urllib.parse.parse_qs(raw.decode()).items()}

    def do_GET(self):
        if self.path.split("?")[0] == "/turnstile/v0/api.js":
            return self.answer(200, WIDGET, "text/javascript")
        if self.path == "/_test/calls":
            with lock:
                return self.answer(200, list(calls))
        self.answer(404, {"error": "not found"})

    def do_POST(self):
        if self.path != "/turnstile/v0/siteverify":
            return self.answer(404, {"error": "not found"})
        f = self.form()
        secret, response = f.get("secret", ""), f.get("response", "")
        with lock:
            calls.append({"secret": secret, "response": response, "remoteip": f.get("remoteip", "")})
        if not secret:
            return self.fail("missing-input-secret")
        if not response:
            return self.fail("missing-input-response")
        if secret not in (PASSES, FAILS, SPENT):
            return self.fail("invalid-input-secret")
        if secret == FAILS or response != DUMMY_TOKEN:
            return self.fail("invalid-input-response")
        if secret == SPENT:
            return self.fail("timeout-or-duplicate")
        self.answer(200, {
            "success": True,
            "error-codes": [],
            "challenge_ts": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
            "hostname": "127.0.0.1",
            "action": "",
            "cdata": "",
        })

    def fail(self, code):
        self.answer(200, {"success": False, "error-codes": [code], "messages": []})


serve(int(sys.argv[1]), Handler)
