"""A Python team's view of sluice: a client generated from openapi/openapi.json with
openapi-python-client, as that team would generate it, driving a sale's first steps against a
live sluice: create a sale, join, read the status until admitted, hold, and a problem answer
parsed as the spec's Problem.

    SLUICE_URL=... SLUICE_ADMIN_KEY=... SLUICE_USER_TOKEN=... OUT=dir python3 python_client.py
"""

import importlib
import os
import subprocess
import sys
import time

SPEC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "openapi", "openapi.json")
OUT = os.environ["OUT"]
BASE = os.environ["SLUICE_URL"]


def check(ok, message):
    if not ok:
        raise SystemExit(f"check failed: {message}")
    print(f"ok - {message}")


generated = subprocess.run(
    ["openapi-python-client", "generate", "--path", SPEC, "--meta", "none",
     "--output-path", os.path.join(OUT, "sluice_client"), "--overwrite"],
    capture_output=True, text=True,
)
report = generated.stdout + generated.stderr
check(generated.returncode == 0, f"the client generates:\n{report}")
check("WARNING" not in report and "Unable to" not in report,
      f"the generator reads every schema and operation:\n{report}")

sys.path.insert(0, OUT)
client_mod = importlib.import_module("sluice_client")
models = importlib.import_module("sluice_client.models")
create_sale = importlib.import_module("sluice_client.api.sales.create_sale")
set_admission = importlib.import_module("sluice_client.api.sales.set_admission")
join_sale = importlib.import_module("sluice_client.api.attempts.join_sale")
get_attempt = importlib.import_module("sluice_client.api.attempts.get_attempt")
hold_stock = importlib.import_module("sluice_client.api.attempts.hold_stock")

# The admin key is an API-key header, which the generated client leaves to its caller.
admin = client_mod.AuthenticatedClient(
    base_url=BASE, token="unused", headers={"X-Admin-Key": os.environ["SLUICE_ADMIN_KEY"]})
user = client_mod.AuthenticatedClient(base_url=BASE, token=os.environ["SLUICE_USER_TOKEN"])

created = create_sale.sync_detailed(
    client=admin,
    body=models.CreateSale(name="Python sale", quantity=5, rate_per_minute=600000,
                           opening=models.OpeningName.FIFO),
    idempotency_key="py-create-1",
)
check(created.status_code == 201 and isinstance(created.parsed, models.SaleOut),
      f"createSale answers a SaleOut: {created.status_code} {created.content!r}")
sale = created.parsed
check(sale.remaining == 5 and sale.status == models.SaleStatusName.OPEN, "the sale is open with 5 left")

settings = set_admission.sync_detailed(
    client=admin, sale_id=sale.id,
    body=models.AdmissionSettings(rate_per_minute=600000, max_active=100,
                                  mode=models.AdmissionModeName.MANUAL))
check(settings.status_code == 200, f"setAdmission: {settings.status_code} {settings.content!r}")

refused = create_sale.sync_detailed(client=admin, body=models.CreateSale(name="x", quantity=0))
check(refused.status_code == 422 and isinstance(refused.parsed, models.Problem)
      and refused.parsed.field == "quantity",
      f"a refusal is a parsed Problem naming the field: {refused.content!r}")

joined = join_sale.sync_detailed(client=user, sale_id=sale.id)
check(joined.status_code == 202 and isinstance(joined.parsed, models.AttemptOut),
      f"joinSale answers an AttemptOut: {joined.status_code} {joined.content!r}")
attempt = joined.parsed
status = attempt
for _ in range(100):
    if status.state == models.AttemptStateName.ADMITTED:
        break
    time.sleep(0.1)
    status = get_attempt.sync_detailed(client=user, attempt_id=attempt.attempt_id).parsed
check(status.state == models.AttemptStateName.ADMITTED and status.admission_token,
      f"getAttempt reads ADMITTED with a token: {status}")

held = hold_stock.sync_detailed(
    client=user, attempt_id=attempt.attempt_id,
    body=models.HoldRequest(admission_token=status.admission_token, quantity=2))
check(held.status_code == 200 and held.parsed.state == models.AttemptStateName.HOLD
      and held.parsed.hold.quantity == 2,
      f"holdStock holds 2: {held.status_code} {held.content!r}")
print("all checks passed")
