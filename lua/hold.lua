-- hold: take units or named seats for an admitted attempt, all or nothing.
-- KEYS: as lua/lib/holding.lua
-- ARGV: attempt, user, kind, quantity, seats
-- REPLY: status, detail?
-- Arguments: 1 attempt, 2 user, 3 kind ('q' or 's'), 4 quantity, 5 seats "A1,A2"
-- The active deadline moves to now + the sale's hold_ttl_ms; meta.version counts the change.
-- Returns {'held', record} (also when already held: idempotent) | {'not_admitted'} |
--         {'limit', units already bought} | {'sold_out', remaining} | {'seat_taken', seat} |
--         {'wrong_kind'}
local seats = {}
local units
if ARGV[3] == 'q' then
  units = tonumber(ARGV[4])
else
  for seat in string.gmatch(ARGV[5], '[^,]+') do table.insert(seats, seat) end
  units = #seats
end
local refused = hold_refusal(ARGV[1], ARGV[2], ARGV[3], units)
if refused then return refused end
if ARGV[3] == 'q' then
  local remaining = tonumber(redis.call('GET', KEYS[4]) or '0')
  if remaining < units then return {'sold_out', tostring(remaining)} end
  redis.call('DECRBY', KEYS[4], units)
else
  for _, seat in ipairs(seats) do
    if redis.call('SISMEMBER', KEYS[5], seat) == 0 then return {'seat_taken', seat} end
  end
  redis.call('SREM', KEYS[5], unpack(seats))
end
return record_hold(ARGV[1], ARGV[2], ARGV[3], ARGV[3] == 'q' and ARGV[4] or ARGV[5], units)
