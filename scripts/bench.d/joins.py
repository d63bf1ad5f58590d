"""Join calls for scripts/bench, as sluice sends them, in Redis's protocol for `redis-cli
--pipe`: EVALSHA of lua/join.lua on one sale's keys, each call carrying <batch> joins of new
users with their buckets' keys made here, as sluice computes them (src/queue/redis.rs).

  python3 joins.py <sha> <key base> <batch> <calls> [first user] | redis-cli --pipe
"""

import hashlib
import sys

sha, base, batch, calls = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
first = int(sys.argv[5]) if len(sys.argv) > 5 else 0
keys = [
    f"{base}:{k}"
    for k in ("meta", "seq", "gone", "users", "active", "seen", "bought", "stock", "sold",
              "owners", "claims")
]
out = sys.stdout.buffer
user = first
for _ in range(calls):
    # presence off, now 0, not fronted, no claim time (the sale is not instant)
    args = ["EVALSHA", sha, str(len(keys)), *keys, "0", "0", "0", "0"]
    for _ in range(batch):
        name = f"user-{user}"
        bucket = int(hashlib.sha1(name.encode()).hexdigest()[:5], 16) % 65536
        args += [name, f"{user:032x}", f"{base}:u:{bucket}"]
        user += 1
    out.write(f"*{len(args)}\r\n".encode())
    for a in args:
        b = a.encode()
        out.write(b"$%d\r\n%s\r\n" % (len(b), b))
