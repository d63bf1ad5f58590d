"""A push service on loopback, in the role of FCM or Mozilla's autopush, and a shop's webhook
receiver: what sluice sends when a waiting user's turn comes, checked with code that is not
sluice's own.

  python3 push_service.py <port> <shop webhook secret>

- POST /_test/subscribe: a new browser subscription, as PushSubscription.toJSON() gives it
  (its P-256 key pair and auth secret are kept here to decrypt).
- POST /_test/vapid: a VAPID key pair, as `web-push generate-vapid-keys` prints it.
- POST /_test/answer {"subscription": n, "status": 410}: that subscription's pushes answer so.
- POST /push/<n>: a push message (RFC 8030). Its VAPID token (RFC 8292) is verified with the
  `cryptography` package, its body decrypted with `http_ece` (PyPI, the reference
  implementation of RFC 8188 / RFC 8291); 201 when both hold, as push services answer.
- POST /hook: the shop's webhook; its Sluice-Signature is checked here with hmac.
- GET /_test/calls: what arrived: [{"kind": "push" | "hook", ...}].
"""

import base64
import hashlib
import hmac
import json
import os
import sys
import threading
import time

import http_ece
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from standin import JsonHandler, serve  # noqa: E402

PORT = int(sys.argv[1])
HOOK_SECRET = sys.argv[2].encode()
ORIGIN = f"http://127.0.0.1:{PORT}"

lock = threading.Lock()
subscriptions = {}  # n -> (private key, auth secret)
answers = {}  # n -> status the push answers with
calls = []


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def raw_public(key):
    return key.public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )


def check_vapid(header):
    """RFC 8292 §3: `vapid t=<JWT>, k=<public key>`; the JWT is ES256 by k, for this origin."""
    params = dict(
        part.strip().split("=", 1) for part in header[len("vapid "):].split(",")
    )
    token, key = params["t"], params["k"]
    head, claims, sig = token.split(".")
    if json.loads(unb64(head)) != {"typ": "JWT", "alg": "ES256"}:
        raise ValueError("not an ES256 JWT")
    public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64(key))
    raw = unb64(sig)
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    public.verify(der, f"{head}.{claims}".encode(), ec.ECDSA(hashes.SHA256()))
    claims = json.loads(unb64(claims))
    now = time.time()
    if claims["aud"] != ORIGIN:
        raise ValueError(f"aud {claims['aud']} is not {ORIGIN}")
    if not now < claims["exp"] <= now + 24 * 3600:
        raise ValueError("exp is not within 24 hours")
    if not claims["sub"].startswith(("mailto:", "https:")):
        raise ValueError("sub is not a contact")
    return key


class Handler(JsonHandler):
    def do_GET(self):
        if self.path == "/_test/calls":
            with lock:
                return self.answer(200, calls)
        self.answer(404, {})

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if self.path == "/_test/subscribe":
            key = ec.generate_private_key(ec.SECP256R1())
            auth = os.urandom(16)
            with lock:
                sub = len(subscriptions) + 1
                subscriptions[sub] = (key, auth)
            return self.answer(200, {
                "endpoint": f"{ORIGIN}/push/{sub}",
                "expirationTime": None,
                "keys": {"p256dh": b64(raw_public(key)), "auth": b64(auth)},
            })
        if self.path == "/_test/vapid":
            key = ec.generate_private_key(ec.SECP256R1())
            scalar = key.private_numbers().private_value.to_bytes(32, "big")
            return self.answer(200, {"public_key": b64(raw_public(key)), "private_key": b64(scalar)})
        if self.path == "/_test/answer":
            body = json.loads(raw)
            with lock:
                answers[body["subscription"]] = body["status"]
            return self.answer(200, {})
        if self.path.startswith("/push/"):
            return self.push(int(self.path.split("/")[2]), raw)
        if self.path == "/hook":
            return self.hook(raw)
        self.answer(404, {})

    def push(self, sub, body):
        record = {
            "kind": "push",
            "subscription": sub,
            "ttl": self.headers.get("TTL"),
            "urgency": self.headers.get("Urgency"),
            "topic": self.headers.get("Topic"),
            "traceparent": self.headers.get("traceparent"),
        }
        try:
            if self.headers.get("Content-Encoding") != "aes128gcm":
                raise ValueError("Content-Encoding is not aes128gcm")
            if record["ttl"] is None:
                raise ValueError("no TTL")
            record["vapid_key"] = check_vapid(self.headers.get("Authorization", ""))
            key, auth = subscriptions[sub]
            plain = http_ece.decrypt(body, private_key=key, auth_secret=auth, version="aes128gcm")
            record["payload"] = json.loads(plain)
            status = answers.get(sub, 201)
        except (ValueError, KeyError, InvalidSignature, http_ece.ECEException) as e:
            record["error"] = f"{type(e).__name__}: {e}"
            status = 400
        record["status"] = status
        with lock:
            calls.append(record)
        self.answer(status, {})

    def hook(self, body):
        header = self.headers.get("Sluice-Signature", "")
        parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
        expected = hmac.new(HOOK_SECRET, f"{parts.get('t')}.".encode() + body, hashlib.sha256).hexdigest()
        record = {
            "kind": "hook",
            "signature_ok": hmac.compare_digest(expected, parts.get("v1", "")),
            "timestamp": int(parts.get("t", "0")),
            "event_id": self.headers.get("Sluice-Event-Id"),
            "traceparent": self.headers.get("traceparent"),
            "body": json.loads(body),
        }
        with lock:
            calls.append(record)
        self.answer(200, {})


serve(PORT, Handler)
