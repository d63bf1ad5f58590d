-- hold_best: hold the best `count` seats side by side for an admitted attempt, picked and
-- taken in one step, so buyers asking at once never get the same seat and each gets the best
-- that is free when its turn in Redis comes.
-- The sale's blocks (each a row's seats of one category, side by side, in order; the blocks
-- nearest the stage first) are in `best`, loaded from the layout by lua/load_best.lua:
-- field 'n:<category>' their number, field '<i>:<category>' the i-th as
-- "<section>|<the seat nearest the stage, 1-based>|<seat,seat,...>" ('' for every category).
-- The seats go to the first block, nearest the stage, with `count` free seats side by side
-- that leave no single free seat between them and a taken seat or the block's end (unless
-- the layout allows single gaps); in it, the placement whose middle is nearest its seat
-- nearest the stage (the first of equals). src/domain/best_seats.rs picks the same way.
-- So that a sale selling front to back does not look through every full block on each ask,
-- `best` keeps per category a cursor, 'from:<category>' = "<version>:<i>": blocks before the
-- i-th had no free seat at that version. It holds while no seat was freed since
-- (meta.freed_at, lua/lib/seatlog.lua); each ask moves it past the full blocks it looked at.
-- KEYS: as lua/lib/holding.lua, then 8 best
-- ARGV: attempt, user, count, category, section, single_gaps
-- REPLY: status, detail?
-- Arguments: 1 attempt, 2 user, 3 count, 4 category ('' any), 5 section ('' any),
--       6 '1' when a single free seat may be left between taken ones
-- Returns as lua/hold.lua does, or {'unloaded'} (the blocks are not in the store: load them,
--         then call again) | {'no_adjacent', free seats}
local function place(free, count, nearest, allow_gaps)
  local best, best_score
  local i, m = 1, #free
  while i <= m do
    if free[i] == 1 then
      local j = i
      while j < m and free[j + 1] == 1 do j = j + 1 end
      for s = i, j - count + 1 do
        local left, right = s - i, j - (s + count - 1)
        if allow_gaps or (left ~= 1 and right ~= 1) then
          local score = math.abs(2 * s + count - 1 - 2 * nearest)
          if not best or score < best_score then best, best_score = s, score end
        end
      end
      i = j + 1
    else
      i = i + 1
    end
  end
  return best
end

local count = tonumber(ARGV[3])
local refused = hold_refusal(ARGV[1], ARGV[2], 's', count)
if refused then return refused end
local category, section = ARGV[4], ARGV[5]
local n = redis.call('HGET', KEYS[8], 'n:' .. category)
if not n then return {'unloaded'} end
local from_field = 'from:' .. category
local start = 1
local cursor = redis.call('HGET', KEYS[8], from_field)
if cursor then
  local at, i = string.match(cursor, '^(%d+):(%d+)$')
  if tonumber(at) >= tonumber(redis.call('HGET', KEYS[1], 'freed_at') or '0') then
    start = tonumber(i)
  end
end
-- The first block from `start` that may have a free seat (nil while each one looked at is full).
local first_free
local reply
for i = start, tonumber(n) do
  local block = redis.call('HGET', KEYS[8], i .. ':' .. category)
  local in_section, nearest, list = string.match(block, '^([^|]*)|(%d+)|(.*)$')
  local seats = {}
  for seat in string.gmatch(list, '[^,]+') do seats[#seats + 1] = seat end
  if (section == '' or section == in_section) and #seats >= count then
    local free = redis.call('SMISMEMBER', KEYS[5], unpack(seats))
    if not first_free then
      for _, f in ipairs(free) do
        if f == 1 then first_free = i break end
      end
    end
    local at = place(free, count, tonumber(nearest), ARGV[6] == '1')
    if at then
      local picked = {unpack(seats, at, at + count - 1)}
      redis.call('SREM', KEYS[5], unpack(picked))
      reply = record_hold(ARGV[1], ARGV[2], 's', table.concat(picked, ','), count)
      break
    end
  elseif not first_free then
    first_free = i
  end
end
redis.call('HSET', KEYS[8], from_field,
  (redis.call('HGET', KEYS[1], 'version') or '0') .. ':' .. (first_free or (tonumber(n) + 1)))
return reply or {'no_adjacent', tostring(redis.call('SCARD', KEYS[5]))}
