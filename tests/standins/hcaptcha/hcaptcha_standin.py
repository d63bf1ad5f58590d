"""hCaptcha's siteverify on loopback, for the gate's tests (hCaptcha publishes no stand-in of
its own).

  python3 hcaptcha_standin.py <port>

Written from hCaptcha's reference:
- POST /siteverify follows "Verify the User Response Server Side"
  (https://docs.hcaptcha.com/#verify-the-user-response-server-side): a form body
  (application/x-www-form-urlencoded; JSON is refused) with `secret`, `response`, optional
  `remoteip` and `sitekey`; the answer is JSON with `success`, `challenge_ts`, `hostname` and,
  on failure, `error-codes` from its table (missing-input-secret, invalid-input-secret,
  missing-input-response, invalid-input-response, sitekey-secret-mismatch,
  invalid-or-already-seen-response, bad-request).
- The keys follow "Integration Testing: Test Keys"
  (https://docs.hcaptcha.com/#integration-testing-test-keys): the secret
  0x0000000000000000000000000000000000000000 with the site key
  10000000-ffff-ffff-ffff-000000000001 passes the response
  10000000-aaaa-bbbb-cccc-000000000001; any other response fails.
- GET /_test/calls: what arrived, for the tests.
"""

import os
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from standin import JsonHandler, serve  # noqa: E402

SECRET = "0x0000000000000000000000000000000000000000"
SITE_KEY = "10000000-ffff-ffff-ffff-000000000001"
PASSING_RESPONSE = "10000000-aaaa-bbbb-cccc-000000000001"

lock = threading.Lock()
calls = []


class Handler(JsonHandler):
    def do_GET(self):
        if self.path == "/_test/calls":
            with lock:
                return self.answer(200, list(calls))
        self.answer(404, {"error": "not found"})

    def do_POST(self):
        if self.path != "/siteverify":
            return self.answer(404, {"error": "not found"})
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if not (self.headers.get("Content-Type") or "").startswith("application/x-www-form-urlencoded"):
            return self.fail("bad-request")
        f = {k: v[0] for k, v in urllib.parse.parse_qs(raw.decode()).items()}
        secret, response = f.get("secret", ""), f.get("response", "")
        with lock:
            calls.append({"secret": secret, "response": response, "remoteip": f.get("remoteip", ""),
                          "sitekey": f.get("sitekey", "")})
        if not secret:
            return self.fail("missing-input-secret")
        if secret != SECRET:
            return self.fail("invalid-input-secret")
        if not response:
            return self.fail("missing-input-response")
        if f.get("sitekey") and f["sitekey"] != SITE_KEY:
            return self.fail("sitekey-secret-mismatch")
        if response != PASSING_RESPONSE:
            return self.fail("invalid-input-response")
        self.answer(200, {
            "success": True,
            "challenge_ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "hostname": "127.0.0.1",
        })

    def fail(self, code):
        self.answer(200, {"success": False, "error-codes": [code]})


serve(int(sys.argv[1]), Handler)
