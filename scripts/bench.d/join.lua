-- wrk: join the sale as a different user each request (tokens from tokens.txt).
local tokens = {}
for line in io.lines(os.getenv("BENCH_TOKENS")) do tokens[#tokens + 1] = line end
local sale = os.getenv("BENCH_SALE")
local i = 0
request = function()
  i = i + 1
  local token = tokens[(i % #tokens) + 1]
  return wrk.format("POST", "/v1/sales/" .. sale .. "/attempts",
    { ["Authorization"] = "Bearer " .. token })
end
dofile("scripts/bench.d/pace.lua")
