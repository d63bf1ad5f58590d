# Shared by scripts/bench and scripts/scaling (sourced): starting a release sluice with the
# limits off, and the wrk / redis-benchmark wrappers. Expects WORK, ADMIN, SECRET,
# CONNECTIONS, DURATION and BIN to be set.

# launch_sluice <name> <port> <queue url> <cluster true|false> <ledger url>: a release sluice
# on 127.0.0.1:<port>, ready when this returns; its pid in LAUNCHED_PID, log in $WORK/<name>.log.
# It logs at its default level, as deployed (`RUST_LOG` unset, whatever the caller's shell has).
# Every sluice launched in one run shares PREFIX and the admission key, as replicas must.
ADMISSION_SEED=$(openssl rand -hex 32 2>/dev/null || echo 5e1ce5e1ce5e1ce5e1ce5e1ce5e1ce5e1ce5e1ce5e1ce5e1ce5e1ce5e1ce5e1c)
launch_sluice() {
  local name=$1 port=$2 queue=$3 cluster=$4 ledger=$5
  env -u SLUICE__QUEUE__URL -u SLUICE__LEDGER__URL -u RUST_LOG \
    SLUICE__HTTP__LISTEN=127.0.0.1:$port SLUICE__QUEUE__URL="$queue" ${cluster:+SLUICE__QUEUE__CLUSTER=$cluster} \
    SLUICE__LEDGER__URL="$ledger" SLUICE__QUEUE__KEY_PREFIX=$PREFIX SLUICE__LEDGER__MAX_CONNECTIONS=40 \
    SLUICE__EMBEDDED__DATA_DIR="$WORK/data-$name" SLUICE__EVENTS__FILE="$WORK/events-$name.jsonl" \
    SLUICE__AUTH__ADMIN_KEY=$ADMIN SLUICE__AUTH__USER_JWT_HS256_SECRET=$SECRET \
    SLUICE__AUTH__ADMISSION_KEY_SEED_HEX="$ADMISSION_SEED" \
    SLUICE__PAYMENTS__WEBHOOK_SECRET=bench-webhook-secret-0123 \
    SLUICE__LIMITS__JOIN_PER_SECOND=0 SLUICE__LIMITS__STATUS_PER_SECOND=0 \
    SLUICE__LIMITS__IP_JOIN_PER_SECOND=0 SLUICE__LIMITS__IP_STATUS_PER_SECOND=0 \
    "$BIN" serve >"$WORK/$name.log" 2>&1 &
  LAUNCHED_PID=$!
  for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$port/health/ready" >/dev/null && return
    sleep 0.1
  done
  echo "sluice did not start:" >&2; cat "$WORK/$name.log" >&2; exit 1
}

# A paused sale on <base>: joins queue up, nobody is admitted, the queue only grows.
paused_sale_on() {
  local id
  id=$(curl -sf "$1/v1/sales" -H "X-Admin-Key: $ADMIN" -H 'Content-Type: application/json' \
    -d '{"name": "bench", "quantity": 1000, "rate_per_minute": 1}' | jq -r .id)
  curl -sf -X POST "$1/v1/sales/$id/pause" -H "X-Admin-Key: $ADMIN" >/dev/null
  echo "$id"
}

# wrk_on <base> <script> [connections]: "<requests/s> <p99 ms> <non-2xx>". With PAUSE_MS set,
# each connection waits that long between an answer and its next request (a paced load);
# PAIRS names the attempts status polls (default: \$WORK/pairs.txt).
wrk_on() {
  local out
  out=$(BENCH_TOKENS=$WORK/tokens.txt BENCH_PAIRS=${PAIRS:-$WORK/pairs.txt} BENCH_SALE=$SALE BENCH_HOLDS=$WORK/holds.txt \
    BENCH_PAUSE_MS=${PAUSE_MS:-0} \
    wrk -t2 -c"${3:-$CONNECTIONS}" -d"$DURATION" --latency -s "scripts/bench.d/$2.lua" "$1")
  local rps p99 non2xx
  rps=$(awk '/Requests\/sec/ {print int($2)}' <<<"$out")
  p99=$(awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub(/us/,"",v); v=v/1000} else if (v ~ /ms$/) {sub(/ms/,"",v)} else if (v ~ /s$/) {sub(/s/,"",v); v=v*1000}; print v}' <<<"$out")
  non2xx=$(awk '/Non-2xx/ {print $4}' <<<"$out")
  echo "$rps ${p99:-?} ${non2xx:-0}"
}

# raw_rps <redis-benchmark args>: requests per second of one command (quiet mode).
raw_rps() { redis-benchmark -c "$CONNECTIONS" -q "$@" | awk '{for (i=1;i<=NF;i++) if ($i=="requests") print int($(i-1))}' | tail -n 1; }

# The join script as sluice runs it (the queue's layout, lua/lib/queue.lua, first) and the keys
# it takes for a sale's key base; then 0 (presence not tracked), now (ms), 0 (not fronted),
# 0 (claims' time: none is made, the sale is not instant) and, for each join (one here, where
# sluice sends those that arrive together), user id, attempt id (32 hex) and
# the key of the user's bucket ('' here: redis-benchmark cannot compute it, so the script
# makes it, with a SHA-1 sluice spares it; join_cost sends it).
JOIN_SRC=$(cat lua/lib/queue.lua lua/join.lua)
join_keys() {
  echo 11 "$1:meta" "$1:seq" "$1:gone" "$1:users" "$1:active" "$1:seen" "$1:bought" "$1:stock" \
    "$1:sold" "$1:owners" "$1:claims"
}
# evalsha_us <redis port> <joins a call>: Redis's own time per join in EVALSHA (µs, from INFO
# commandstats) since its statistics were last reset.
evalsha_us() {
  redis-cli -p "$1" INFO commandstats | tr -d '\r' | awk -F'[=,]' -v b="$2" '
    /^cmdstat_evalsha:/ { printf "%.2f", $6 / b }'
}
# new_line <redis port>: the key base of a new sale's line of layout 2 (lua/lib/queue.lua).
new_line() {
  local base="joincost$RANDOM:{sale:joincost$RANDOM}"
  redis-cli -p "$1" HSET "$base:meta" stock_initialised 1 status open layout 2 >/dev/null
  echo "$base"
}
# pipe_joins <redis port> <join sha> <key base> <batch> <calls> <first user>: sends <calls>
# calls of <batch> joins of new users, numbered from <first user>, through one pipelined
# connection (scripts/bench.d/joins.py makes them as sluice sends them), with Redis's command
# statistics reset first; prints the seconds it took by the clock.
pipe_joins() {
  local port=$1 pipe t0 t1
  pipe=$(mktemp)
  python3 scripts/bench.d/joins.py "$2" "$3" "$4" "$5" "$6" >"$pipe"
  redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
  t0=$(date +%s.%N)
  redis-cli -p "$port" --pipe <"$pipe" >/dev/null
  t1=$(date +%s.%N)
  rm -f "$pipe"
  awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}'
}
# join_cost <redis port> <join sha> <batch>: what the join script costs one Redis thread, each
# call carrying <batch> joins of new users with their buckets (as sluice sends the joins of one
# sale that arrive together), 300,000 joins on a new line through one pipelined connection:
# "<µs of Redis CPU per join> <joins a second one Redis thread takes at that cost> <joins a
# second the pipe took, from the clock>".
join_cost() {
  local port=$1 batch=$3 calls secs us
  calls=$((300000 / batch))
  secs=$(pipe_joins "$port" "$2" "$(new_line "$port")" "$batch" "$calls" 0)
  us=$(evalsha_us "$port" "$batch")
  awk -v us="$us" -v n="$((calls * batch))" -v s="$secs" \
    'BEGIN { printf "%.2f %d %d\n", us, (us > 0 ? 1e6 / us : 0), n / s }'
}
# join_fill <redis port> <join sha>: the join script's cost as one line fills to a million,
# in calls of 64: "<the mean µs a join> <µs a join, each quarter of the million in turn>".
join_fill() {
  local port=$1 base q out="" sum=0 us
  base=$(new_line "$port")
  for q in 0 1 2 3; do
    pipe_joins "$port" "$2" "$base" 64 3906 $((q * 3906 * 64)) >/dev/null
    us=$(evalsha_us "$port" 64)
    out="$out$us "
    sum=$(awk -v a="$sum" -v b="$us" 'BEGIN {print a + b}')
  done
  echo "$(awk -v s="$sum" 'BEGIN {printf "%.2f", s / 4}') $out"
}
# queued_in <redis-cli args...> <key base>: how many wait in the sale (lua/stats.lua).
STATS_SRC=$(cat lua/lib/queue.lua lua/stats.lua)
queued_in() {
  local base=${*: -1}
  redis-cli "${@:1:$#-1}" EVAL "$STATS_SRC" 6 "$base:meta" "$base:seq" "$base:gone" "$base:active" \
    "$base:stock" "$base:seats" | head -n 1
}
