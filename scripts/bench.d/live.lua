-- wrk: the HTTP floor, an endpoint that does no work (no Redis, no token), through the same
-- server and middleware as every request.
wrk.method = "GET"
wrk.path = "/health/live"
dofile("scripts/bench.d/pace.lua")
