-- hold: take units or named seats for an admitted attempt, all or nothing.
-- KEYS: 1 meta, 2 active, 3 holds (hash attempt -> "kind|payload|user"), 4 stock (counter),
--       5 seats (set of free seats), 6 bought (hash user -> units held or confirmed)
-- ARGV: attempt, user, kind, quantity, seats
-- REPLY: status, detail?
-- Arguments: 1 attempt, 2 user, 3 kind ('q' or 's'), 4 quantity, 5 seats "A1,A2"
-- The active deadline moves to now + the sale's hold_ttl_ms; meta.version counts the change.
-- Returns {'held', record} (also when already held: idempotent) | {'not_admitted'} |
--         {'limit', units already bought} | {'sold_out', remaining} | {'seat_taken', seat} |
--         {'wrong_kind'}
local existing = redis.call('HGET', KEYS[3], ARGV[1])
if existing then return {'held', existing} end
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then return {'not_admitted'} end
local kind = redis.call('HGET', KEYS[1], 'kind')
if (kind == 'quantity' and ARGV[3] ~= 'q') or (kind == 'seats' and ARGV[3] ~= 's') then
  return {'wrong_kind'}
end
local seats = {}
local units
if ARGV[3] == 'q' then
  units = tonumber(ARGV[4])
else
  for seat in string.gmatch(ARGV[5], '[^,]+') do table.insert(seats, seat) end
  units = #seats
end
local limit = tonumber(redis.call('HGET', KEYS[1], 'per_user_limit') or '0')
local bought = tonumber(redis.call('HGET', KEYS[6], ARGV[2]) or '0')
if bought + units > limit then return {'limit', bought} end
if ARGV[3] == 'q' then
  local remaining = tonumber(redis.call('GET', KEYS[4]) or '0')
  if remaining < units then return {'sold_out', remaining} end
  redis.call('DECRBY', KEYS[4], units)
else
  for _, seat in ipairs(seats) do
    if redis.call('SISMEMBER', KEYS[5], seat) == 0 then return {'seat_taken', seat} end
  end
  redis.call('SREM', KEYS[5], unpack(seats))
end
local record = ARGV[3] .. '|' .. (ARGV[3] == 'q' and ARGV[4] or ARGV[5]) .. '|' .. ARGV[2]
redis.call('HSET', KEYS[3], ARGV[1], record)
redis.call('HINCRBY', KEYS[6], ARGV[2], units)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(redis.call('HGET', KEYS[1], 'hold_ttl_ms') or '0')
redis.call('ZADD', KEYS[2], 'XX', now + ttl, ARGV[1])
redis.call('HINCRBY', KEYS[1], 'version', 1)
return {'held', record}
