-- wrk (loaded by the request scripts with dofile; wrk runs from the repository's root): a paced
-- load when BENCH_PAUSE_MS is set (fractions allowed). Each connection waits between an answer and
-- its next request, that long on average, exponentially distributed, so that the connections do
-- not fall into step and arrive in bursts. wrk's timers count whole milliseconds: each draw is
-- rounded up or down at random, in proportion, so the mean stays the one asked for.
local pause = tonumber(os.getenv("BENCH_PAUSE_MS") or "0")
if pause > 0 then
  delay = function() return math.floor(-pause * math.log(1 - math.random()) + math.random()) end
end
