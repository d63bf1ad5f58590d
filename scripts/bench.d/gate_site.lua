-- wrk: a guarded page of a site behind nginx, as an admitted visitor asks it
-- (BENCH_GATE_COOKIE: a live session; ignored by nginx + origin alone).
wrk.method = "GET"
wrk.path = "/shop/item?x=1"
wrk.headers["Cookie"] = "sluice_session=" .. os.getenv("BENCH_GATE_COOKIE")
dofile("scripts/bench.d/pace.lua")
