-- wrk: poll the status of queued attempts, each with its owner's token and the queue ticket
-- its join answered (pairs.txt), as a client does; BENCH_TICKETS=0 polls without the tickets
-- (every answer a lookup in the queue store). The requests are written once per thread, in
-- `init` (where wrk has set the Host header): formatting one per request costs wrk CPU on the
-- cores it shares with sluice, which the floor (`live.lua`, one static request) does not pay.
local with_tickets = os.getenv("BENCH_TICKETS") ~= "0"
local requests = {}
init = function()
  for line in io.lines(os.getenv("BENCH_PAIRS")) do
    local attempt, token, ticket = line:match("^(%S+) (%S+) ?(%S*)$")
    local path = "/v1/attempts/" .. attempt
    if with_tickets and ticket ~= "" and ticket ~= "-" then path = path .. "?ticket=" .. ticket end
    requests[#requests + 1] = wrk.format("GET", path, { ["Authorization"] = "Bearer " .. token })
  end
end
local i = 0
request = function()
  i = i % #requests + 1
  return requests[i]
end
dofile("scripts/bench.d/pace.lua")
