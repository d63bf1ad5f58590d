"""Best-available asks as sluice sends them, for measuring lua/hold_best.lua alone on a Redis
of one's own: a sale of the 50,000-seat hall (hall.py) set up in Redis's protocol, then <n>
asks for <count> seats by as many admitted attempts, for `redis-cli --pipe`. Redis's own CPU
a call is then `usec_per_call` of `cmdstat_evalsha` (INFO commandstats; the set-up runs
before a CONFIG RESETSTAT).

  python3 hall.py > hall.json
  SHA=$(redis-cli SCRIPT LOAD "$(cat ../../lua/lib/seatlog.lua ../../lua/lib/holding.lua ../../lua/hold_best.lua)")
  python3 best_holds.py hall.json "$SHA" 5000 1 | redis-cli --pipe
  redis-cli INFO commandstats | grep evalsha
"""

import json
import sys

hall_file, sha, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
count = sys.argv[4] if len(sys.argv) > 4 else "1"
base = "bestholds:{sale:bestholds}"
out = sys.stdout.buffer


def cmd(*args):
    out.write(b"*%d\r\n" % len(args))
    for a in args:
        b = str(a).encode()
        out.write(b"$%d\r\n%s\r\n" % (len(b), b))


hall = json.load(open(hall_file))
cmd("HSET", f"{base}:meta", "stock_initialised", "1", "kind", "seats", "per_user_limit", "20",
    "hold_ttl_ms", "600000", "version", "1")
ids, blocks = [], []
for s in hall["sections"]:
    for r in s["rows"]:
        seats = [f'{s["id"]}-{r["id"]}-{x["number"]}' for x in r["seats"]]
        ids += seats
        # The hall's stage spans every row: a row's seats are as near, the first the nearest.
        blocks.append((r["seats"][0]["y"], f'{s["id"]}|1|' + ",".join(seats)))
blocks.sort(key=lambda b: b[0])
for i in range(0, len(ids), 1000):
    cmd("SADD", f"{base}:seats", *ids[i:i + 1000])
for i, (_, block) in enumerate(blocks):
    cmd("HSET", f"{base}:best", f"{i + 1}:", block)
cmd("HSET", f"{base}:best", "n:", len(blocks))
for i in range(0, n, 1000):
    members = []
    for k in range(i, min(n, i + 1000)):
        members += ["9999999999999", f"a{k:031d}"]
    cmd("ZADD", f"{base}:active", *members)
cmd("CONFIG", "RESETSTAT")
keys = [f"{base}:{k}" for k in
        ("meta", "active", "holds", "stock", "seats", "bought", "seatlog", "best")]
for k in range(n):
    cmd("EVALSHA", sha, len(keys), *keys, f"a{k:031d}", f"u{k}", count, "", "", "0")
