#!/usr/bin/env python3
"""A stand-in for Toss Payments' core API, for sluice's tests (no third party publishes one that
does what these tests need: confirm with an Idempotency-Key, a confirm answered late, webhook
resends). Written from Toss's API reference; README.md says which page each endpoint follows.
Standard library only.

    python3 toss_standin.py PORT SECRET_KEY

The API (Basic auth: base64 of "<secret key>:"):
    POST /v1/payments/confirm            {paymentKey, orderId, amount}
    GET  /v1/payments/{paymentKey}
    GET  /v1/payments/orders/{orderId}
    POST /v1/payments/{paymentKey}/cancel {cancelReason, cancelAmount?}
The buyer's side (what Toss's window does), without auth, CORS open:
    GET  /v2/standard                    the SDK: TossPayments(clientKey).payment(...).requestPayment(...)
    POST /_window/pay                    {orderId, amount, orderName}: authorized, IN_PROGRESS; {paymentKey}
The test's controls:
    POST /_test/config                   {confirm_delay_ms}: confirms answer that late (done at once)
    POST /_test/status                   {paymentKey, status}: Toss changed the payment by itself
    POST /_test/webhook                  {url, paymentKey, times, status?}: PAYMENT_STATUS_CHANGED,
                                         `times` times; `status` lies about it in the body
    POST /_test/deposit                  {url, orderId, secret?}: DEPOSIT_CALLBACK (a wrong secret if given)
    POST /_test/virtual_account          {orderId, amount}: a virtual account issued, WAITING_FOR_DEPOSIT
    GET  /_test/calls                    every API call received: [{method, path, idempotency_key, traceparent, tracestate}]
"""

import base64
import json
import sys
import threading
import time
import urllib.request
import os
import uuid
from datetime import datetime, timedelta, timezone

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from standin import JsonHandler, serve  # noqa: E402

KST = timezone(timedelta(hours=9))

PAYMENTS = {}  # paymentKey -> Payment object
BY_ORDER = {}  # orderId -> paymentKey
IDEMPOTENT = {}  # (key, path) -> (status, body)
CALLS = []
CONFIG = {"confirm_delay_ms": 0}
LOCK = threading.Lock()

SDK = r"""
// The stand-in's TossPayments SDK (v2 standard): requestPayment authorizes the payment at the
// stand-in (as Toss's window does when the buyer pays) and sends the browser to successUrl.
(function () {
  const base = new URL(document.currentScript.src).origin;
  window.TossPayments = function (clientKey) {
    return {
      payment: function (opts) {
        return {
          requestPayment: async function (req) {
            const res = await fetch(base + '/_window/pay', {
              method: 'POST', headers: { 'Content-Type': 'application/json' },
              body: JSON.stringify({ clientKey, orderId: req.orderId, amount: req.amount.value,
                orderName: req.orderName, customerKey: opts && opts.customerKey }),
            });
            const paid = await res.json();
            const to = new URL(res.ok ? req.successUrl : req.failUrl, location.href);
            if (res.ok) {
              to.searchParams.set('paymentType', 'NORMAL');
              to.searchParams.set('orderId', req.orderId);
              to.searchParams.set('paymentKey', paid.paymentKey);
              to.searchParams.set('amount', String(req.amount.value));
            } else {
              to.searchParams.set('code', paid.code);
              to.searchParams.set('message', paid.message);
              to.searchParams.set('orderId', req.orderId);
            }
            location.href = to.toString();
          },
        };
      },
    };
  };
})();
"""


def now():
    return datetime.now(KST).isoformat(timespec="seconds")


def payment(order_id, amount, order_name, status="IN_PROGRESS", method="카드"):
    key = "tviva" + datetime.now().strftime("%Y%m%d%H%M%S") + uuid.uuid4().hex[:8]
    p = {
        "mId": "tvivarepublica",
        "lastTransactionKey": None,
        "paymentKey": key,
        "orderId": order_id,
        "orderName": order_name or "",
        "taxExemptionAmount": 0,
        "status": status,
        "requestedAt": now(),
        "approvedAt": None,
        "useEscrow": False,
        "cultureExpense": False,
        "card": None,
        "virtualAccount": None,
        "secret": None,
        "type": "NORMAL",
        "country": "KR",
        "failure": None,
        "isPartialCancelable": True,
        "cancels": None,
        "currency": "KRW",
        "totalAmount": amount,
        "balanceAmount": amount,
        "suppliedAmount": amount - amount // 11,
        "vat": amount // 11,
        "taxFreeAmount": 0,
        "method": method,
        "version": "2022-11-16",
    }
    return p


def post_json(url, body):
    data = json.dumps(body, ensure_ascii=False).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except Exception:
        return 0


class Handler(JsonHandler):
    def error(self, status, code, message):
        self.answer(status, {"code": code, "message": message})

    def authorized(self):
        expected = "Basic " + base64.b64encode((SECRET + ":").encode()).decode()
        if self.headers.get("Authorization") != expected:
            self.error(401, "UNAUTHORIZED_KEY", "인증되지 않은 시크릿 키 혹은 클라이언트 키 입니다.")
            return False
        return True

    def do_GET(self):
        path = self.path.split("?")[0]
        if path == "/v2/standard":
            return self.answer(200, SDK.encode(), "application/javascript")
        if path == "/_test/calls":
            with LOCK:
                return self.answer(200, list(CALLS))
        with LOCK:
            CALLS.append({"method": "GET", "path": path, "idempotency_key": None,
                          "traceparent": self.headers.get("traceparent"),
                          "tracestate": self.headers.get("tracestate")})
        if not self.authorized():
            return
        if path.startswith("/v1/payments/orders/"):
            key = BY_ORDER.get(path[len("/v1/payments/orders/"):])
        elif path.startswith("/v1/payments/"):
            key = path[len("/v1/payments/"):]
        else:
            return self.error(404, "NOT_FOUND", "없는 경로입니다.")
        with LOCK:
            p = PAYMENTS.get(key)
            if p is None:
                return self.error(404, "NOT_FOUND_PAYMENT", "존재하지 않는 결제 정보 입니다.")
            return self.answer(200, p)

    def do_POST(self):
        path = self.path.split("?")[0]
        body = self.body()
        if body is None:
            return self.error(400, "INVALID_REQUEST", "잘못된 요청입니다.")
        if path.startswith("/_window/"):
            return self.window(path, body)
        if path.startswith("/_test/"):
            return self.control(path, body)
        key = self.headers.get("Idempotency-Key")
        with LOCK:
            CALLS.append({"method": "POST", "path": path, "idempotency_key": key,
                          "traceparent": self.headers.get("traceparent"),
                          "tracestate": self.headers.get("tracestate")})
        if not self.authorized():
            return
        if key:
            with LOCK:
                seen = IDEMPOTENT.get((key, path))
            if seen:
                return self.answer(*seen)
        if path == "/v1/payments/confirm":
            status, answer = self.confirm(body)
        elif path.startswith("/v1/payments/") and path.endswith("/cancel"):
            status, answer = self.cancel(path[len("/v1/payments/"):-len("/cancel")], body)
        else:
            return self.error(404, "NOT_FOUND", "없는 경로입니다.")
        if key and status < 500:
            with LOCK:
                IDEMPOTENT[(key, path)] = (status, answer)
        self.answer(status, answer)

    def confirm(self, body):
        delay = CONFIG["confirm_delay_ms"] / 1000
        with LOCK:
            p = PAYMENTS.get(body.get("paymentKey"))
            if p is None or p["orderId"] != body.get("orderId"):
                return 404, {"code": "NOT_FOUND_PAYMENT_SESSION", "message": "결제 시간이 만료되어 결제 진행 데이터가 존재하지 않습니다."}
            if p["status"] == "DONE":
                return 400, {"code": "ALREADY_PROCESSED_PAYMENT", "message": "이미 처리된 결제 입니다."}
            if p["status"] != "IN_PROGRESS":
                return 403, {"code": "FORBIDDEN_REQUEST", "message": "허용되지 않은 요청입니다."}
            if p["totalAmount"] != body.get("amount"):
                return 400, {"code": "INVALID_REQUEST", "message": "결제 금액이 일치하지 않습니다."}
            p["status"] = "DONE"
            p["approvedAt"] = now()
            p["lastTransactionKey"] = uuid.uuid4().hex.upper()
            answer = dict(p)
        if delay:
            time.sleep(delay)  # approved at once; the answer comes late
        return 200, answer

    def cancel(self, payment_key, body):
        with LOCK:
            p = PAYMENTS.get(payment_key)
            if p is None:
                return 404, {"code": "NOT_FOUND_PAYMENT", "message": "존재하지 않는 결제 정보 입니다."}
            if not body.get("cancelReason"):
                return 400, {"code": "INVALID_REQUEST", "message": "취소 사유는 필수입니다."}
            if p["status"] not in ("DONE", "PARTIAL_CANCELED", "WAITING_FOR_DEPOSIT"):
                return 400, {"code": "NOT_CANCELABLE_PAYMENT", "message": "취소 할 수 없는 결제 입니다."}
            amount = body.get("cancelAmount", p["balanceAmount"])
            if amount > p["balanceAmount"]:
                return 400, {"code": "NOT_CANCELABLE_AMOUNT", "message": "취소 할 수 없는 금액 입니다."}
            p["balanceAmount"] -= amount
            p["status"] = "CANCELED" if p["balanceAmount"] == 0 else "PARTIAL_CANCELED"
            p["lastTransactionKey"] = uuid.uuid4().hex.upper()
            p["cancels"] = (p["cancels"] or []) + [{
                "transactionKey": p["lastTransactionKey"], "cancelReason": body["cancelReason"],
                "canceledAt": now(), "cancelAmount": amount, "cancelStatus": "DONE",
            }]
            return 200, dict(p)

    def window(self, path, body):
        if path != "/_window/pay":
            return self.error(404, "NOT_FOUND", "없는 경로입니다.")
        order_id, amount = body.get("orderId"), body.get("amount")
        if not isinstance(order_id, str) or not isinstance(amount, int):
            return self.error(400, "INVALID_REQUEST", "잘못된 요청입니다.")
        with LOCK:
            p = payment(order_id, amount, body.get("orderName"))
            PAYMENTS[p["paymentKey"]] = p
            BY_ORDER[order_id] = p["paymentKey"]
        self.answer(200, {"paymentKey": p["paymentKey"]})

    def control(self, path, body):
        if path == "/_test/config":
            CONFIG.update(body)
            return self.answer(200, CONFIG)
        if path == "/_test/status":
            with LOCK:
                p = PAYMENTS[body["paymentKey"]]
                p["status"] = body["status"]
                if body["status"] == "DONE":
                    p["approvedAt"] = now()
                return self.answer(200, p)
        if path == "/_test/virtual_account":
            with LOCK:
                p = payment(body["orderId"], body["amount"], body.get("orderName"),
                            "WAITING_FOR_DEPOSIT", "가상계좌")
                p["secret"] = "ps_" + uuid.uuid4().hex
                PAYMENTS[p["paymentKey"]] = p
                BY_ORDER[body["orderId"]] = p["paymentKey"]
                return self.answer(200, p)
        if path == "/_test/webhook":
            with LOCK:
                p = dict(PAYMENTS[body["paymentKey"]])
            if body.get("status"):
                p["status"] = body["status"]
            event = {"eventType": "PAYMENT_STATUS_CHANGED", "createdAt": datetime.now().isoformat(), "data": p}
            codes = [post_json(body["url"], event) for _ in range(body.get("times", 1))]
            return self.answer(200, {"answers": codes})
        if path == "/_test/deposit":
            with LOCK:
                p = PAYMENTS[BY_ORDER[body["orderId"]]]
                if "secret" not in body:
                    p["status"] = "DONE"
                    p["approvedAt"] = now()
                secret = body.get("secret", p["secret"])
                event = {"createdAt": datetime.now().isoformat(), "secret": secret, "status": "DONE",
                         "transactionKey": uuid.uuid4().hex.upper(), "orderId": body["orderId"]}
            return self.answer(200, {"answers": [post_json(body["url"], event)]})
        self.error(404, "NOT_FOUND", "없는 경로입니다.")


if __name__ == "__main__":
    port, SECRET = int(sys.argv[1]), sys.argv[2]
    serve(port, Handler)
