-- init_sale: write a sale's settings (unless the store has a later version of them and the
-- write is not forced, lib/settings.lua); when the store holds no stock for the sale yet (a
-- new sale, or keys lost in a flush) or when forced (`sluice reconcile`: the ledger's
-- settings and holdings stand), rebuild its stock, active set, holds and per-user counts
-- from the ledger's snapshot. One script: nobody sees half.
-- KEYS: 1 meta, 2 stock, 3 seats, 4 active, 5 holds, 6 owners, 7 users, 8 bought,
--       9 unrecorded (an admission batch not yet in the ledger: the rebuilt active set is
--       the ledger's, so that batch is gone), 10 sold (CONFIRMED attempts' hold records),
--       11 seatlog (starts anew: seat maps read the rebuilt holdings whole)
-- ARGV: settings: [version, status, opens_at_ms, closes_at_ms, max_active, per_user_limit, rate_per_minute, kind, hold_ttl_ms, payment_ttl_ms, instant], force, reset, free_units, n_seats, seats..., n_live, live...: [attempt, user, deadline_ms, hold], n_bought, bought...: [user, units], n_buyers, buyers...: [user, attempt, bought]
-- REPLY: rebuilt
-- Arguments: 1-11 the settings (lib/settings.lua), 12 force: '1', '0', or
--       'v<version>': rebuild only if meta.version still reads that (the drift checker's
--       repair, a compare-and-set: a change since its read leaves the sale alone; it keeps
--       the unrecorded batch, whose attempts its snapshot carries, and the settings),
--       13 reset (1/0: the sale existed before, so places in its queue were lost),
--       14 free quantity, 15 n free seats, then the seats,
--       then n live attempts, then per attempt: id, user, deadline ms, hold record ('' if none),
--       then n users, then per user: user, units held or bought,
--       then n buyers, then per buyer: user, their CONFIRMED attempt (join answers it), what
--       it bought as a hold record ('' if none: a refund gives it back)
-- Returns 1 if the sale was rebuilt, 0 if only its settings were written (or, guarded,
-- nothing: the sale had moved).
local FORCE = SETTINGS_ARGS + 1
local guarded = string.sub(ARGV[FORCE], 1, 1) == 'v'
if guarded and (redis.call('HGET', KEYS[1], 'version') or '0') ~= string.sub(ARGV[FORCE], 2) then
  return 0
end
if not guarded then write_settings(KEYS[1], 1, ARGV[FORCE] == '1') end
local fresh = redis.call('HSETNX', KEYS[1], 'stock_initialised', '1') == 1
-- Serials start again at 1 when the keys were lost: a new numbering of the line.
if fresh then
  new_epoch()
  redis.call('HSET', KEYS[1], 'layout', LAYOUT)
end
if not fresh and ARGV[FORCE] == '0' then return 0 end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[8], KEYS[10])
if not guarded then redis.call('DEL', KEYS[9]) end
redis.call('HINCRBY', KEYS[1], 'version', 1)
reset_seatlog(KEYS[1], KEYS[11])
if ARGV[FORCE + 1] == '1' then
  local t = redis.call('TIME')
  redis.call('HSET', KEYS[1], 'rebuilt_at_ms', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
end
redis.call('SET', KEYS[2], ARGV[FORCE + 2])
local i = FORCE + 3
local n_seats = tonumber(ARGV[i])
i = i + 1
local last = i + n_seats - 1
while i <= last do
  local to = math.min(i + 4999, last)
  redis.call('SADD', KEYS[3], unpack(ARGV, i, to))
  i = to + 1
end
-- An admitted user's entry in their bucket, where the line keeps them (a user still waiting
-- keeps that entry: a join finds their place, as before the rebuild).
local function keep_admitted(user, attempt)
  if keeps_admitted() then redis.call('HSETNX', user_bucket(user), user, attempt) end
end
local n_live = tonumber(ARGV[i])
i = i + 1
for _ = 1, n_live do
  local attempt, user, deadline, hold = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  redis.call('ZADD', KEYS[4], deadline, attempt)
  redis.call('HSET', KEYS[6], attempt, user)
  redis.call('HSET', KEYS[7], user, attempt)
  keep_admitted(user, attempt)
  if hold ~= '' then redis.call('HSET', KEYS[5], attempt, hold) end
  i = i + 4
end
local n_users = tonumber(ARGV[i])
i = i + 1
for _ = 1, n_users do
  redis.call('HSET', KEYS[8], ARGV[i], ARGV[i + 1])
  i = i + 2
end
local n_buyers = tonumber(ARGV[i] or '0')
i = i + 1
for _ = 1, n_buyers do
  redis.call('HSET', KEYS[7], ARGV[i], ARGV[i + 1])
  keep_admitted(ARGV[i], ARGV[i + 1])
  redis.call('HSET', KEYS[6], ARGV[i + 1], ARGV[i])
  if ARGV[i + 2] ~= '' then redis.call('HSET', KEYS[10], ARGV[i + 1], ARGV[i + 2]) end
  i = i + 3
end
return 1
