# Sourced by scripts/bench: the gate, on Redis + PostgreSQL, in one run:
#   - the check of an admitted visitor (a live session cookie) against GET /health/live, and
#     the queue-store calls made meanwhile per check (Redis's commands processed during the
#     run, background work included: the admitter's ticks, the gate's store probe);
#   - nginx + gate + origin against nginx + origin alone (deploy/proxies/nginx/sluice-gate.conf,
#     the origin a static answer of nginx's own), an admitted visitor's page request.
# Sets GATE_CHECK_RPS, GATE_LIVE_RPS, GATE_RATIO, GATE_STORE_CALLS (per check),
# GATE_SITE_RPS, GATE_PLAIN_RPS, GATE_SITE_SHARE (gated / plain), GATE_SITE_P99, GATE_PLAIN_P99.
NGINX=${NGINX:-/usr/sbin/nginx}

# gate_session: a gate on a new sale, one visitor through it; sets GATE_ID and GATE_COOKIE.
gate_session() {
  local sale visitor token attempt status admission jar=$WORK/gate-jar
  sale=$(curl -sf "$BASE/v1/sales" -H "X-Admin-Key: $ADMIN" -H 'Content-Type: application/json' \
    -d '{"name": "gate", "quantity": 1, "max_active": 1000, "rate_per_minute": 60000}' | jq -r .id)
  GATE_ID=$(curl -sf "$BASE/v1/gates" -H "X-Admin-Key: $ADMIN" -H 'Content-Type: application/json' \
    -d "{\"name\": \"bench\", \"sale_id\": \"$sale\", \"hosts\": [\"127.0.0.1\"], \"paths\": [\"/shop/\"], \"session_minutes\": 30}" | jq -r .id)
  visitor=$(curl -sf -c "$jar" -X POST "$BASE/v1/gates/$GATE_ID/visitors" -H 'Content-Type: application/json' -d '{}')
  token=$(jq -r .token <<<"$visitor")
  attempt=$(curl -sf -X POST "$BASE/v1/sales/$sale/attempts" -H "Authorization: Bearer $token" | jq -r .attempt_id)
  for _ in $(seq 1 100); do
    status=$(curl -sf "$BASE/v1/attempts/$attempt" -H "Authorization: Bearer $token")
    [ "$(jq -r .state <<<"$status")" = ADMITTED ] && break
    sleep 0.1
  done
  admission=$(jq -r .admission_token <<<"$status")
  # A way back signed by the gate: asked of the check as a proxy would.
  local back
  back=$(curl -s -o /dev/null -w '%{redirect_url}' "$BASE/v1/gate/check" -H 'X-Forwarded-Host: 127.0.0.1' \
    -H 'X-Forwarded-Uri: /shop/item?x=1' -H 'Accept: text/html' | sed 's/.*return_to=//')
  curl -sf -b "$jar" -c "$jar" -X POST "$BASE/v1/gates/$GATE_ID/session" -H 'Content-Type: application/json' \
    -d "{\"attempt_id\": \"$attempt\", \"admission_token\": \"$admission\", \"return_to\": \"$back\"}" >/dev/null
  GATE_COOKIE=$(awk '$6 == "sluice_session" {print $7}' "$jar")
}

# redis_commands: Redis's commands processed so far.
redis_commands() { rcli INFO stats | tr -d '\r' | awk -F: '/^total_commands_processed:/ {print $2}'; }

# nginx_site <port> <site port> <plain port>: nginx with the gate's config on <site port>, the
# same site without the gate on <plain port>, and the origin (a static answer) on <port>.
nginx_site() {
  local origin=$1 site=$2 plain=$3 dir=$WORK/nginx
  mkdir -p "$dir/tmp"
  sed -e "s/127.0.0.1:8080/127.0.0.1:$PORT/; s/127.0.0.1:3000/127.0.0.1:$origin/; s/listen 80;/listen 127.0.0.1:$site;/" \
    deploy/proxies/nginx/sluice-gate.conf >"$dir/site.conf"
  cat >"$dir/nginx.conf" <<CONF
daemon off; pid $dir/nginx.pid; error_log $dir/error.log; worker_processes 1;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $dir/tmp; proxy_temp_path $dir/tmp; fastcgi_temp_path $dir/tmp;
  uwsgi_temp_path $dir/tmp; scgi_temp_path $dir/tmp;
  include $dir/site.conf;
  upstream plain_origin { server 127.0.0.1:$origin; keepalive 32; }
  server { listen 127.0.0.1:$origin; location / { return 200 "the shop\n"; } }
  server {
    listen 127.0.0.1:$plain;
    location / { proxy_pass http://plain_origin; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
CONF
  "$NGINX" -c "$dir/nginx.conf" -p "$dir" &
  NGINX_PID=$!
  for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$plain/" >/dev/null && return; sleep 0.1; done
  echo "nginx did not start" >&2; cat "$dir/error.log" >&2; exit 1
}

gate_bench() {
  SALE=${SALE:-} # (wrk_on passes it on; the gate's scripts do not read it)
  gate_session
  local before after checks
  export BENCH_GATE_HOST=127.0.0.1 BENCH_GATE_COOKIE=$GATE_COOKIE
  read -r GATE_LIVE_RPS _ _ < <(median3 wrk_run live)
  before=$(redis_commands)
  read -r GATE_CHECK_RPS GATE_CHECK_P99 GATE_CHECK_BAD < <(wrk_run gate_check)
  after=$(redis_commands)
  checks=$(awk -v r="$GATE_CHECK_RPS" -v d="${DURATION%s}" 'BEGIN {print r * d}')
  GATE_STORE_CALLS=$(awk -v c="$((after - before))" -v n="$checks" 'BEGIN {printf "%.5f", (n > 0 ? c / n : 0)}')
  read -r GATE_CHECK_RPS GATE_CHECK_P99 GATE_CHECK_BAD < <(median3 wrk_run gate_check)
  GATE_RATIO=$(ratio "$GATE_CHECK_RPS" "$GATE_LIVE_RPS")
  local origin site plain
  origin=$((PORT + 11)); site=$((PORT + 12)); plain=$((PORT + 13))
  nginx_site "$origin" "$site" "$plain"
  read -r GATE_SITE_RPS GATE_SITE_P99 GATE_SITE_BAD < <(median3 wrk_on "http://127.0.0.1:$site" gate_site)
  read -r GATE_PLAIN_RPS GATE_PLAIN_P99 _ < <(median3 wrk_on "http://127.0.0.1:$plain" gate_site)
  GATE_SITE_SHARE=$(ratio "$GATE_SITE_RPS" "$GATE_PLAIN_RPS")
  kill "$NGINX_PID"; wait "$NGINX_PID" 2>/dev/null || true
}
