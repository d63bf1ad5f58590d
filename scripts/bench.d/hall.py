"""A stadium's layout for scripts/bench: 10 sections of 50 rows of 100 seats (50,000), the
first 10 rows of each VIP, the rest R.

  python3 hall.py > layout.json
"""

import json
import sys

sections = []
for s in range(10):
    rows = []
    for r in range(50):
        seats = [{"number": str(n + 1), "x": 100 + s * 9000 + n * 80, "y": 1000 + r * 90,
                  "category": "VIP" if r < 10 else "R"} for n in range(100)]
        rows.append({"id": str(r + 1), "seats": seats})
    sections.append({"id": f"S{s + 1}", "name": f"Section {s + 1}", "rows": rows})
json.dump({"name": "Stadium 50k", "stage": {"label": "STAGE", "x": 100, "y": 100, "width": 90000,
           "height": 600}, "sections": sections}, sys.stdout)
