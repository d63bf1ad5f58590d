#!/usr/bin/env python3
"""A stand-in for PortOne's V2 API, for sluice's tests. Written from PortOne's API reference;
README.md says which page each endpoint follows. Its webhooks are signed by the
`standardwebhooks` package (PyPI), the Standard Webhooks specification's own library, so sluice's
verifier is checked against code that is not sluice's.

    python3 portone_standin.py PORT API_SECRET STORE_ID WEBHOOK_SECRET

The API (`Authorization: PortOne <api secret>`):
    GET  /payments/{paymentId}
    POST /payments/{paymentId}/cancel    {amount?, reason}
The buyer's side (what PortOne's window does), CORS open:
    GET  /v2/browser-sdk.js              the SDK: PortOne.requestPayment({...})
    POST /_window/pay                    {storeId, paymentId, totalAmount, currency}: PAID + webhook
The test's controls:
    POST /_test/config                   {webhook_url, read_delay_ms}: where its webhooks go; how
                                         late a read of a payment is answered
    POST /_test/pay                      {paymentId, amount, currency?, status?, times?}: the payment
                                         is made (PAID, or status FAILED) and its webhook sent
                                         `times` times (one webhook-id)
    POST /_test/webhook                  {paymentId, type, times?, secret?, timestamp?}: a webhook
                                         alone (signed with `secret` if given; `timestamp` in
                                         Unix seconds)
    GET  /_test/calls                    every API call received: [{method, path}]
"""

import json
import sys
import threading
import time
import urllib.request
import os
import uuid
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from standin import JsonHandler, serve  # noqa: E402

from standardwebhooks.webhooks import Webhook

PAYMENTS = {}
CALLS = []
CONFIG = {"webhook_url": None, "read_delay_ms": 0}
LOCK = threading.Lock()

SDK = r"""
// The stand-in's PortOne browser SDK: requestPayment pays at the stand-in (as PortOne's window
// does when the buyer pays), which then sends its webhook to sluice.
(function () {
  const base = new URL(document.currentScript.src).origin;
  window.PortOne = {
    requestPayment: async function (req) {
      const res = await fetch(base + '/_window/pay', {
        method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(req),
      });
      return res.json();
    },
  };
})();
"""


def iso(t=None):
    return (t or datetime.now(timezone.utc)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def send_webhook(payment_id, kind, times=1, secret=None, timestamp=None):
    body = json.dumps({
        "type": kind,
        "timestamp": iso(),
        "data": {"paymentId": payment_id, "storeId": STORE_ID, "transactionId": str(uuid.uuid4())},
    })
    msg_id = "msg_" + uuid.uuid4().hex
    at = datetime.fromtimestamp(timestamp, tz=timezone.utc) if timestamp else datetime.now(timezone.utc)
    signature = Webhook(secret or WEBHOOK_SECRET).sign(msg_id, at, body)
    headers = {
        "Content-Type": "application/json",
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": signature,
    }
    codes = []
    for _ in range(times):
        req = urllib.request.Request(CONFIG["webhook_url"], data=body.encode(), headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                codes.append(r.status)
        except urllib.error.HTTPError as e:
            codes.append(e.code)
        except Exception:
            codes.append(0)
    return codes


def make(payment_id, amount, currency, status):
    p = PAYMENTS.get(payment_id) or {
        "id": payment_id, "transactionId": str(uuid.uuid4()), "merchantId": "merchant-1",
        "storeId": STORE_ID, "channel": {"type": "TEST", "pgProvider": "TOSSPAYMENTS"},
        "version": "V2", "requestedAt": iso(), "updatedAt": iso(), "statusChangedAt": iso(),
        "orderName": "", "customer": {}, "isCulturalExpense": False, "products": [],
    }
    p.update({"status": status, "currency": currency,
              "amount": {"total": amount, "taxFree": 0, "discount": 0, "paid": amount if status == "PAID" else 0,
                         "cancelled": 0, "cancelledTaxFree": 0}})
    if status == "PAID":
        p["paidAt"] = iso()
    if status == "FAILED":
        p["failure"] = {"reason": "카드 한도가 초과되었습니다.", "pgCode": "C51", "pgMessage": "한도초과"}
    PAYMENTS[payment_id] = p
    return p


class Handler(JsonHandler):
    def error(self, status, kind, message):
        self.answer(status, {"type": kind, "message": message})

    def authorized(self):
        if self.headers.get("Authorization") != "PortOne " + API_SECRET:
            self.error(401, "UNAUTHORIZED", "인증 정보가 올바르지 않습니다.")
            return False
        return True

    def do_GET(self):
        path = self.path.split("?")[0]
        if path == "/v2/browser-sdk.js":
            return self.answer(200, SDK.encode(), "application/javascript")
        if path == "/_test/calls":
            with LOCK:
                return self.answer(200, list(CALLS))
        with LOCK:
            CALLS.append({"method": "GET", "path": path})
        if not self.authorized():
            return
        if not path.startswith("/payments/"):
            return self.error(404, "NOT_FOUND", "없는 경로입니다.")
        time.sleep(CONFIG["read_delay_ms"] / 1000)
        with LOCK:
            p = PAYMENTS.get(path[len("/payments/"):])
            if p is None:
                return self.error(404, "PAYMENT_NOT_FOUND", "결제 건이 존재하지 않습니다.")
            return self.answer(200, p)

    def do_POST(self):
        path = self.path.split("?")[0]
        body = self.body()
        if body is None:
            return self.error(400, "INVALID_REQUEST", "잘못된 요청입니다.")
        if path == "/_window/pay":
            with LOCK:
                make(body["paymentId"], body["totalAmount"], body.get("currency", "KRW").replace("CURRENCY_", ""), "PAID")
            send_webhook(body["paymentId"], "Transaction.Paid")
            return self.answer(200, {"paymentId": body["paymentId"], "txId": str(uuid.uuid4())})
        if path == "/_test/config":
            CONFIG.update(body)
            return self.answer(200, CONFIG)
        if path == "/_test/pay":
            with LOCK:
                make(body["paymentId"], body["amount"], body.get("currency", "KRW"), body.get("status", "PAID"))
            kind = "Transaction.Paid" if body.get("status", "PAID") == "PAID" else "Transaction.Failed"
            return self.answer(200, {"answers": send_webhook(body["paymentId"], kind, body.get("times", 1))})
        if path == "/_test/webhook":
            codes = send_webhook(body["paymentId"], body["type"], body.get("times", 1),
                                 body.get("secret"), body.get("timestamp"))
            return self.answer(200, {"answers": codes})
        with LOCK:
            CALLS.append({"method": "POST", "path": path})
        if not self.authorized():
            return
        if path.startswith("/payments/") and path.endswith("/cancel"):
            return self.cancel(path[len("/payments/"):-len("/cancel")], body)
        self.error(404, "NOT_FOUND", "없는 경로입니다.")

    def cancel(self, payment_id, body):
        with LOCK:
            p = PAYMENTS.get(payment_id)
            if p is None:
                return self.error(404, "PAYMENT_NOT_FOUND", "결제 건이 존재하지 않습니다.")
            if not body.get("reason"):
                return self.error(400, "INVALID_REQUEST", "취소 사유는 필수입니다.")
            if p["status"] == "CANCELLED":
                return self.error(409, "PAYMENT_ALREADY_CANCELLED", "이미 취소된 결제입니다.")
            if p["status"] not in ("PAID", "PARTIAL_CANCELLED"):
                return self.error(409, "PAYMENT_NOT_PAID", "결제가 완료되지 않았습니다.")
            left = p["amount"]["total"] - p["amount"]["cancelled"]
            amount = body.get("amount", left)
            if amount > left:
                return self.error(409, "CANCEL_AMOUNT_EXCEEDS_CANCELLABLE_AMOUNT", "취소 가능 금액을 초과했습니다.")
            p["amount"]["cancelled"] += amount
            p["status"] = "CANCELLED" if p["amount"]["cancelled"] == p["amount"]["total"] else "PARTIAL_CANCELLED"
            p["cancelledAt"] = iso()
            cancellation = {"status": "SUCCEEDED", "id": "cancel-" + uuid.uuid4().hex[:12],
                            "totalAmount": amount, "taxFreeAmount": 0, "vatAmount": 0,
                            "reason": body["reason"], "cancelledAt": iso(), "requestedAt": iso()}
            return self.answer(200, {"cancellation": cancellation})


if __name__ == "__main__":
    port = int(sys.argv[1])
    API_SECRET, STORE_ID, WEBHOOK_SECRET = sys.argv[2:5]
    serve(port, Handler)
