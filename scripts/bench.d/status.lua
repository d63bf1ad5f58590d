-- wrk: poll the status of queued attempts, each with its owner's token and the queue ticket
-- its join answered (pairs.txt), as a client does; BENCH_TICKETS=0 polls without the tickets
-- (every answer a lookup in the queue store).
local with_tickets = os.getenv("BENCH_TICKETS") ~= "0"
local pairs_ = {}
for line in io.lines(os.getenv("BENCH_PAIRS")) do
  local attempt, token, ticket = line:match("^(%S+) (%S+) ?(%S*)$")
  local path = "/v1/attempts/" .. attempt
  if with_tickets and ticket ~= "" and ticket ~= "-" then path = path .. "?ticket=" .. ticket end
  pairs_[#pairs_ + 1] = { path, token }
end
local i = 0
request = function()
  i = i + 1
  local p = pairs_[(i % #pairs_) + 1]
  return wrk.format("GET", p[1], { ["Authorization"] = "Bearer " .. p[2] })
end
dofile("scripts/bench.d/pace.lua")
