-- wrk: each admitted user holds one unit (holds.txt: attempt, user token, admission token).
local holds = {}
for line in io.lines(os.getenv("BENCH_HOLDS")) do
  local attempt, token, admission = line:match("^(%S+) (%S+) (%S+)$")
  holds[#holds + 1] = { attempt, token, admission }
end
local i = 0
request = function()
  i = i + 1
  local h = holds[(i % #holds) + 1]
  return wrk.format("POST", "/v1/attempts/" .. h[1] .. "/hold",
    { ["Authorization"] = "Bearer " .. h[2], ["Content-Type"] = "application/json" },
    '{"admission_token":"' .. h[3] .. '","quantity":1}')
end
