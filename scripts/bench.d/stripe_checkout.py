#!/usr/bin/env python3
"""Checkout to CONFIRMED over Stripe (localstripe), as buyers do it: each buyer holds a unit,
checks out (sluice creates the PaymentIntent), pays it at Stripe (a card attached and the
intent confirmed, what Stripe.js does), and waits for CONFIRMED (Stripe's webhook). Prints:

    stripe <buyers> <confirmed/s> <p50 ms> <p99 ms> <checkout p99 ms> <provider share %>

where a buyer's time runs from the checkout request to the status that says CONFIRMED, and the
provider's share is sluice's time in calls to Stripe (sluice_provider_call_duration_seconds)
over the buyers' times. Loopback only; bounded by the buyers' count and a deadline.

    stripe_checkout.py <sluice> <admin key> <user secret> <stripe> <secret key> <buyers> <concurrency>
"""

import base64
import hashlib
import hmac
import json
import sys
import time
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor

BASE, ADMIN, SECRET, STRIPE, STRIPE_KEY = sys.argv[1:6]
BUYERS, CONCURRENCY = int(sys.argv[6]), int(sys.argv[7])
DEADLINE = time.monotonic() + 600


def token(user):
    b64 = lambda v: base64.urlsafe_b64encode(json.dumps(v).encode()).rstrip(b"=").decode()
    head = f"{b64({'alg': 'HS256', 'typ': 'JWT'})}.{b64({'sub': user, 'exp': int(time.time()) + 3600})}"
    sig = hmac.new(SECRET.encode(), head.encode(), hashlib.sha256).digest()
    return f"{head}.{base64.urlsafe_b64encode(sig).rstrip(b'=').decode()}"


def call(method, url, headers, body=None, form=None):
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers = {**headers, "Content-Type": "application/json"}
    if form is not None:
        data = urllib.parse.urlencode(form).encode()
        headers = {**headers, "Content-Type": "application/x-www-form-urlencoded"}
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"null")


def sluice(method, path, user=None, body=None):
    headers = {"Authorization": f"Bearer {token(user)}"} if user else {"X-Admin-Key": ADMIN}
    return call(method, BASE + path, headers, body)


def stripe(path, form):
    return call("POST", STRIPE + path, {"Authorization": f"Bearer {STRIPE_KEY}"}, form=form)


def provider_seconds():
    text = urllib.request.urlopen(BASE + "/metrics", timeout=30).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("sluice_provider_call_duration_seconds_sum"))


def buyer(sale, n):
    user = f"stripe-buyer-{n}"
    attempt = sluice("POST", f"/v1/sales/{sale}/attempts", user)
    while attempt["state"] != "ADMITTED" and time.monotonic() < DEADLINE:
        time.sleep(0.05)
        attempt = sluice("GET", f"/v1/attempts/{attempt['attempt_id']}", user)
    aid = attempt["attempt_id"]
    sluice("POST", f"/v1/attempts/{aid}/hold", user,
           {"admission_token": attempt["admission_token"], "quantity": 1})
    start = time.monotonic()
    paying = sluice("POST", f"/v1/attempts/{aid}/checkout", user)
    checkout = time.monotonic() - start
    intent = paying["payment"]["pay"]["client_secret"].split("_secret_")[0]
    method = stripe("/v1/payment_methods", {"type": "card", "card[number]": "4242424242424242",
                                            "card[exp_month]": "12", "card[exp_year]": "2034",
                                            "card[cvc]": "123"})
    stripe(f"/v1/payment_intents/{intent}", {"payment_method": method["id"]})
    stripe(f"/v1/payment_intents/{intent}/confirm", {})
    while time.monotonic() < DEADLINE:
        if sluice("GET", f"/v1/attempts/{aid}", user)["state"] == "CONFIRMED":
            return time.monotonic() - start, checkout
        time.sleep(0.05)
    raise RuntimeError(f"{aid} not confirmed in time")


def main():
    sale = sluice("POST", "/v1/sales", body={
        "name": "bench-stripe", "quantity": BUYERS, "per_user_limit": 1,
        "rate_per_minute": 1_000_000, "max_active": 1_000_000, "payment_ttl_secs": 600,
        "currency": "KRW", "unit_price": 55_000})["id"]
    before = provider_seconds()
    began = time.monotonic()
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        results = list(pool.map(lambda n: buyer(sale, n), range(BUYERS)))
    elapsed = time.monotonic() - began
    spent = provider_seconds() - before
    times = sorted(r[0] for r in results)
    checkouts = sorted(r[1] for r in results)
    pct = lambda xs, p: xs[min(len(xs) - 1, int(p * len(xs)))] * 1000
    print(f"stripe {len(results)} {len(results) / elapsed:.1f} {pct(times, 0.5):.0f} "
          f"{pct(times, 0.99):.0f} {pct(checkouts, 0.99):.1f} {100 * spent / sum(times):.1f}")


main()
