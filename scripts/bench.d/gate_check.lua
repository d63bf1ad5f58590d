-- wrk: the gate's check for an admitted visitor, as a proxy asks it (BENCH_GATE_HOST,
-- BENCH_GATE_COOKIE: a live session). Not a page request, so no renewal is due.
wrk.method = "GET"
wrk.path = "/v1/gate/check"
wrk.headers["X-Forwarded-Host"] = os.getenv("BENCH_GATE_HOST")
wrk.headers["X-Forwarded-Uri"] = "/shop/item?x=1"
wrk.headers["X-Forwarded-Method"] = "GET"
wrk.headers["Cookie"] = "sluice_session=" .. os.getenv("BENCH_GATE_COOKIE")
dofile("scripts/bench.d/pace.lua")
