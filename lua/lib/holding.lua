-- What a hold checks and writes, whatever picked its units or seats (lua/hold.lua: the
-- client's; lua/hold_best.lua: the best available), prepended to both (so it is written
-- once), after lua/lib/seatlog.lua.
-- Scripts that include this take KEYS: 1 meta, 2 active, 3 holds (hash attempt ->
-- "kind|payload|user"), 4 stock (counter), 5 seats (set of free seats), 6 bought (hash user
-- -> units held or confirmed), 7 seatlog (lua/lib/seatlog.lua)

-- Whether `attempt` of `user` may take `units` of kind `k` ('q' units, 's' seats): nil if
-- so, else the reply: {'held', record} when it holds already (a hold is idempotent),
-- {'not_admitted'}, {'wrong_kind'} or {'limit', units already bought}.
local function hold_refusal(attempt, user, k, units)
  local existing = redis.call('HGET', KEYS[3], attempt)
  if existing then return {'held', existing} end
  if not redis.call('ZSCORE', KEYS[2], attempt) then return {'not_admitted'} end
  local kind = redis.call('HGET', KEYS[1], 'kind')
  if (kind == 'quantity' and k ~= 'q') or (kind == 'seats' and k ~= 's') then
    return {'wrong_kind'}
  end
  local limit = tonumber(redis.call('HGET', KEYS[1], 'per_user_limit') or '0')
  local bought = tonumber(redis.call('HGET', KEYS[6], user) or '0')
  if bought + units > limit then return {'limit', tostring(bought)} end
  return nil
end

-- Records the hold of `units` (`payload`: the count, or the seats "A1,A2") whose stock the
-- caller took: its record, the user's count, the active deadline (now + the sale's
-- hold_ttl_ms), the version and the seat log. Returns {'held', record}.
local function record_hold(attempt, user, k, payload, units)
  local record = k .. '|' .. payload .. '|' .. user
  redis.call('HSET', KEYS[3], attempt, record)
  redis.call('HINCRBY', KEYS[6], user, units)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local ttl = tonumber(redis.call('HGET', KEYS[1], 'hold_ttl_ms') or '0')
  redis.call('ZADD', KEYS[2], 'XX', now + ttl, attempt)
  redis.call('HINCRBY', KEYS[1], 'version', 1)
  if k == 's' then log_seats(KEYS[1], KEYS[7], 'h', payload) end
  return {'held', record}
end
