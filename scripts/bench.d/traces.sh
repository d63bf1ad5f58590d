# Sourced by scripts/bench: join and status of the embedded sluice with traces off and on, in
# alternating rounds on the same machine (a fresh sluice each run, medians):
#   off      no traces;
#   on       `trace_sample_ratio` 0.01 (requests without a caller's trace), OTLP/HTTP to
#            tests/otlp/receiver.py, which decodes every span;
#   every    every trace kept (ratio 1), to the same receiver;
#   down     every trace kept, the collector down (nothing listens at its port);
#   slow     every trace kept, the collector answering each export after 6 s (past the 5 s the
#            exporter waits).
# Each run also reads sluice's resident memory at its end and the spans it dropped. Sets, for
# each mode M (OFF, ON, EVERY, DOWN, SLOW), TR_JOIN_M and TR_STATUS_M (req/s), TR_RSS_M (MiB)
# and TR_DROPPED_M; the ratios TR_JOIN_RATIO and TR_STATUS_RATIO (on / off), TR_DOWN_RATIO and
# TR_SLOW_RATIO (status, down or slow / every); TR_ROUNDS, every run's figures; TR_SPANS, the
# spans the receiver decoded.
TRACE_ROUNDS=${TRACE_ROUNDS:-3}
TRACE_MODES=${TRACE_MODES:-off on every down slow}

# traces_round <mode>: "<join req/s> <status req/s> <RSS MiB> <spans dropped>" of a fresh
# embedded sluice.
traces_round() {
  local endpoint= ratio=1
  case $1 in
    on) endpoint=http://127.0.0.1:$(cat "$WORK/otlp.port"); ratio=0.01 ;;
    every) endpoint=http://127.0.0.1:$(cat "$WORK/otlp.port") ;;
    down) endpoint=http://127.0.0.1:$(cat "$WORK/otlp-down.port") ;;
    slow) endpoint=http://127.0.0.1:$(cat "$WORK/otlp-slow.port") ;;
  esac
  # A fresh data directory: the memory figure is this run's, not the replay of the last ones.
  rm -rf "$WORK/data-sluice-embedded"
  if [ -n "$endpoint" ]; then
    SLUICE__TELEMETRY__OTLP_ENDPOINT=$endpoint SLUICE__TELEMETRY__TRACE_SAMPLE_RATIO=$ratio \
      start_sluice embedded
  else
    start_sluice embedded
  fi
  local join status rss dropped
  SALE=$(paused_sale)
  read -r join _ _ < <(wrk_run join)
  SALE=$(paused_sale)
  "$HARNESS" join-all "$BASE" "$SALE" "$WORK/tokens-status.txt" "$WORK/pairs-traces.txt"
  read -r status _ _ < <(PAIRS=$WORK/pairs-traces.txt wrk_run status)
  rss=$(awk '/^VmRSS:/ {printf "%.0f", $2 / 1024}' "/proc/$SLUICE_PID/status")
  dropped=$(curl -sf "$BASE/metrics" | awk '/^sluice_trace_spans_dropped_total / {print $2 + 0}')
  stop_sluice
  echo "$join $status $rss ${dropped:-0}"
}

traces_rounds() {
  python3 tests/otlp/receiver.py "$WORK/otlp.port" "$WORK/spans.jsonl" &
  local receiver=$!
  python3 tests/otlp/receiver.py "$WORK/otlp-slow.port" /dev/null --delay 6 &
  local slow=$!
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' \
    >"$WORK/otlp-down.port"
  local i mode j s r d
  for _ in $(seq 1 50); do [ -s "$WORK/otlp.port" ] && [ -s "$WORK/otlp-slow.port" ] && break; sleep 0.1; done
  : >"$WORK/traces-rounds.txt"
  for i in $(seq 1 "$TRACE_ROUNDS"); do
    for mode in $TRACE_MODES; do
      read -r j s r d < <(traces_round "$mode")
      echo "$mode $j $s $r $d" >>"$WORK/traces-rounds.txt"
      echo "bench: traces $mode, round $i: join $j, status $s, ${r} MiB, $d dropped" >&2
    done
  done
  kill "$receiver" "$slow"
  median_of() { awk -v m="$1" -v c="$2" '$1 == m {print $c}' "$WORK/traces-rounds.txt" | sort -n |
    awk '{v[NR] = $1} END {print (NR % 2 ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2))}'; }
  local m
  for m in off on every down slow; do
    local up=${m^^}
    printf -v "TR_JOIN_$up" '%s' "$(median_of "$m" 2)"
    printf -v "TR_STATUS_$up" '%s' "$(median_of "$m" 3)"
    printf -v "TR_RSS_$up" '%s' "$(median_of "$m" 4)"
    printf -v "TR_DROPPED_$up" '%s' "$(median_of "$m" 5)"
  done
  TR_JOIN_RATIO=$(ratio "$TR_JOIN_ON" "$TR_JOIN_OFF")
  TR_STATUS_RATIO=$(ratio "$TR_STATUS_ON" "$TR_STATUS_OFF")
  TR_DOWN_RATIO=$(ratio "$TR_STATUS_DOWN" "$TR_STATUS_EVERY")
  TR_SLOW_RATIO=$(ratio "$TR_STATUS_SLOW" "$TR_STATUS_EVERY")
  TR_ROUNDS=$(awk '{printf "%s%s: join %s, status %s, %s MiB, %s dropped", (NR > 1 ? "; " : ""), $1, $2, $3, $4, $5}' "$WORK/traces-rounds.txt")
  TR_SPANS=$(wc -l <"$WORK/spans.jsonl" 2>/dev/null || echo 0)
}
