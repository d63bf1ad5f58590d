# Sourced by scripts/bench: join and status of the embedded sluice with traces off and on
# (OTLP/HTTP to tests/otlp/receiver.py, which decodes every span; `trace_sample_ratio` 0.01,
# requests without a caller's trace), in alternating rounds on the same machine. Sets
# TR_JOIN_OFF, TR_JOIN_ON, TR_STATUS_OFF, TR_STATUS_ON (medians, req/s), their ratios
# TR_JOIN_RATIO and TR_STATUS_RATIO (on / off), TR_ROUNDS (each round's figures) and
# TR_SPANS (spans the receiver decoded).
TRACE_ROUNDS=${TRACE_ROUNDS:-3}

# traces_round off|on: "<join req/s> <status req/s>" of a fresh embedded sluice.
traces_round() {
  if [ "$1" = on ]; then
    SLUICE__TELEMETRY__OTLP_ENDPOINT=http://127.0.0.1:$(cat "$WORK/otlp.port") \
      SLUICE__TELEMETRY__TRACE_SAMPLE_RATIO=0.01 start_sluice embedded
  else
    start_sluice embedded
  fi
  local join status
  SALE=$(paused_sale)
  read -r join _ _ < <(wrk_run join)
  SALE=$(paused_sale)
  "$HARNESS" join-all "$BASE" "$SALE" "$WORK/tokens-status.txt" "$WORK/pairs-traces.txt"
  read -r status _ _ < <(PAIRS=$WORK/pairs-traces.txt wrk_run status)
  stop_sluice
  echo "$join $status"
}

traces_rounds() {
  python3 tests/otlp/receiver.py "$WORK/otlp.port" "$WORK/spans.jsonl" &
  local receiver=$! i mode j s
  for _ in $(seq 1 50); do [ -s "$WORK/otlp.port" ] && break; sleep 0.1; done
  : >"$WORK/traces-rounds.txt"
  for i in $(seq 1 "$TRACE_ROUNDS"); do
    for mode in off on; do
      read -r j s < <(traces_round "$mode")
      echo "$mode $j $s" >>"$WORK/traces-rounds.txt"
      echo "bench: traces $mode, round $i: join $j, status $s" >&2
    done
  done
  kill "$receiver"
  median_of() { awk -v m="$1" -v c="$2" '$1 == m {print $c}' "$WORK/traces-rounds.txt" | sort -n |
    awk '{v[NR] = $1} END {print (NR % 2 ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2))}'; }
  TR_JOIN_OFF=$(median_of off 2); TR_JOIN_ON=$(median_of on 2)
  TR_STATUS_OFF=$(median_of off 3); TR_STATUS_ON=$(median_of on 3)
  TR_JOIN_RATIO=$(ratio "$TR_JOIN_ON" "$TR_JOIN_OFF")
  TR_STATUS_RATIO=$(ratio "$TR_STATUS_ON" "$TR_STATUS_OFF")
  TR_ROUNDS=$(awk '{printf "%s%s: join %s, status %s", (NR > 1 ? "; " : ""), $1, $2, $3}' "$WORK/traces-rounds.txt")
  TR_SPANS=$(wc -l <"$WORK/spans.jsonl" 2>/dev/null || echo 0)
}
