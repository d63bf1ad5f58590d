-- wrk: each admitted user of a sale of the 50,000-seat hall holds one seat: with
-- BENCH_SEAT_MODE=best, the best available one (`best_available`, count 1); otherwise the seat
-- of the same line of BENCH_SEATS (its named seat, `seat_ids`). BENCH_SEAT_HOLDS: attempt,
-- user token, admission token.
local holds, seats = {}, {}
for line in io.lines(os.getenv("BENCH_SEAT_HOLDS")) do
  local attempt, token, admission = line:match("^(%S+) (%S+) (%S+)$")
  holds[#holds + 1] = { attempt, token, admission }
end
for line in io.lines(os.getenv("BENCH_SEATS")) do seats[#seats + 1] = line end
local best = os.getenv("BENCH_SEAT_MODE") == "best"
local i = 0
request = function()
  i = i + 1
  local k = (i % #holds) + 1
  local h = holds[k]
  local what = best and '"best_available":{"count":1}' or ('"seat_ids":["' .. seats[k] .. '"]')
  return wrk.format("POST", "/v1/attempts/" .. h[1] .. "/hold",
    { ["Authorization"] = "Bearer " .. h[2], ["Content-Type"] = "application/json" },
    '{"admission_token":"' .. h[3] .. '",' .. what .. '}')
end
