-- What the ledger's transitions ask of a sale's holds and active set (restore, finish,
-- extend), prepended to the scripts that apply them (so it is written once). A change to the
-- stock, the holds or the active set bumps meta.version, which the drift checker reads to
-- tell a store that stood still from one that moved under its reads.
-- Scripts that include this (after lua/lib/seatlog.lua) take KEYS: 1 meta, 2 holds, 3 stock,
-- 4 seats, 5 bought, 6 active, 7 sold (the hold records of CONFIRMED attempts, kept so a
-- refund can give their units back), 8 seatlog.

local function changes_now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function bump_version()
  redis.call('HINCRBY', KEYS[1], 'version', 1)
end

-- Gives the attempt's held (or, refunded, sold) units or seats back and frees its slot, or
-- with `keep_until` (ms; '' for none) keeps the slot until then (a hold the ledger could not
-- take: still admitted). At most once: the record goes in the same step. 1 if stock came back.
local function restore_attempt(attempt, keep_until)
  local moved
  if keep_until == '' then
    moved = redis.call('ZREM', KEYS[6], attempt)
  else
    moved = redis.call('ZADD', KEYS[6], 'XX', tonumber(keep_until), attempt)
  end
  local records = KEYS[2]
  local record = redis.call('HGET', records, attempt)
  if not record and keep_until == '' then
    records = KEYS[7]
    record = redis.call('HGET', records, attempt)
  end
  if not record then
    if moved == 1 then bump_version() end
    return 0
  end
  local kind, payload, user = string.match(record, '^(%a)|([^|]*)|(.*)$')
  local units = 0
  if kind == 'q' then
    units = tonumber(payload)
    redis.call('INCRBY', KEYS[3], units)
  else
    for seat in string.gmatch(payload, '[^,]+') do
      redis.call('SADD', KEYS[4], seat)
      units = units + 1
    end
  end
  redis.call('HINCRBY', KEYS[5], user, -units)
  redis.call('HDEL', records, attempt)
  bump_version()
  if kind == 's' then log_seats(KEYS[1], KEYS[8], 'f', payload) end
  return 1
end

-- The attempt leaves the active set without giving stock back (confirmed): its units stay
-- sold and counted against the user's limit, its hold record kept among the sold.
local function finish_attempt(attempt)
  local record = redis.call('HGET', KEYS[2], attempt)
  if record then
    redis.call('HSET', KEYS[7], attempt, record)
    redis.call('HDEL', KEYS[2], attempt)
  end
  local active = redis.call('ZREM', KEYS[6], attempt)
  if record or active > 0 then bump_version() end
  if record and string.sub(record, 1, 1) == 's' then
    log_seats(KEYS[1], KEYS[8], 's', string.match(record, '^s|([^|]*)|'))
  end
end

-- The attempt went on to pay: its active deadline becomes now + the sale's payment TTL.
local function extend_attempt(attempt)
  local ttl = tonumber(redis.call('HGET', KEYS[1], 'payment_ttl_ms') or '0')
  redis.call('ZADD', KEYS[6], 'XX', changes_now_ms() + ttl, attempt)
end
