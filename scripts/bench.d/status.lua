-- wrk: poll the status of queued attempts, each with its owner's token (pairs.txt).
local pairs_ = {}
for line in io.lines(os.getenv("BENCH_PAIRS")) do
  local attempt, token = line:match("^(%S+) (%S+)$")
  pairs_[#pairs_ + 1] = { attempt, token }
end
local i = 0
request = function()
  i = i + 1
  local p = pairs_[(i % #pairs_) + 1]
  return wrk.format("GET", "/v1/attempts/" .. p[1], { ["Authorization"] = "Bearer " .. p[2] })
end
dofile("scripts/bench.d/pace.lua")
