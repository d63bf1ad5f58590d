-- hold_best: hold the best `count` seats side by side for an admitted attempt, picked and
-- taken in one step, so buyers asking at once never get the same seat and each gets the best
-- that is free when its turn in Redis comes.
-- The sale's blocks (each a row's seats side by side, in order, of one category when the ask
-- names one; the blocks nearest the stage first) are in `best`, loaded from the layout by lua/load_best.lua:
-- field 'n:<category>' their number, field '<i>:<category>' the i-th as
-- "<section>|<the seat nearest the stage, 1-based>|<seat,seat,...>" ('' for every category).
-- The seats go to the first block, nearest the stage, with `count` free seats side by side
-- that leave no single free seat between them and a taken seat or the block's end (unless
-- the layout allows single gaps); in it, the placement whose middle is nearest its seat
-- nearest the stage (the first of equals). src/domain/best_seats.rs picks the same way.
-- So that a sale selling front to back does not look through every full block on each ask,
-- `best` keeps per category and count a cursor, 'from:<category>:<count>' = "<version>:<i>":
-- at that version no block before the i-th had room for that count. It holds while no seat
-- moved since (meta.seats_moved_at, lua/lib/seatlog.lua); each ask moves its count's cursor
-- to the block it took seats in (or past every block it looked through), and brings the
-- other counts' cursors of the category to its version, back to that block, the only one
-- it changed.
-- KEYS: as lua/lib/holding.lua, then 8 best
-- ARGV: attempt, user, count, category, section, single_gaps
-- REPLY: status, detail?
-- Arguments: 1 attempt, 2 user, 3 count, 4 category ('' any), 5 section ('' any),
--       6 '1' when a single free seat may be left between taken ones
-- Returns as lua/hold.lua does, or {'unloaded'} (the blocks are not in the store: load them,
--         then call again) | {'no_adjacent', free seats}
-- The most seats one ask takes (src/domain/best_seats.rs MAX_COUNT).
local MAX_COUNT = 20

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
local moved = tonumber(redis.call('HGET', KEYS[1], 'seats_moved_at') or '0')
local from_field = 'from:' .. category .. ':' .. count
local start = 1
local cursor = redis.call('HGET', KEYS[8], from_field)
if cursor then
  local at, i = string.match(cursor, '^(%d+):(%d+)$')
  if tonumber(at) >= moved then start = tonumber(i) end
end
-- The first block from `start` not known to lack room: one looked through is, unless it was
-- left out (another section, too small: not looked at).
local next_start
local reply, taken_in
for i = start, tonumber(n) do
  local block = redis.call('HGET', KEYS[8], i .. ':' .. category)
  local in_section, nearest, list = string.match(block, '^([^|]*)|(%d+)|(.*)$')
  local seats = {}
  for seat in string.gmatch(list, '[^,]+') do seats[#seats + 1] = seat end
  if (section == '' or section == in_section) and #seats >= count then
    local free = redis.call('SMISMEMBER', KEYS[5], unpack(seats))
    local at = place(free, count, tonumber(nearest), ARGV[6] == '1')
    if at then
      local picked = {unpack(seats, at, at + count - 1)}
      redis.call('SREM', KEYS[5], unpack(picked))
      reply = record_hold(ARGV[1], ARGV[2], 's', table.concat(picked, ','), count)
      next_start, taken_in = next_start or i, i
      break
    end
  else
    next_start = next_start or i
  end
end
local now = redis.call('HGET', KEYS[1], 'version') or '0'
if taken_in then
  -- The hold changed one block: every count's cursor of the category still valid is brought
  -- back to it (another category's blocks are others: its cursors lapse, the hold having
  -- moved seats).
  for c = 1, MAX_COUNT do
    local field = 'from:' .. category .. ':' .. c
    local kept = redis.call('HGET', KEYS[8], field)
    if kept and c ~= count then
      local at, i = string.match(kept, '^(%d+):(%d+)$')
      if tonumber(at) >= moved then
        redis.call('HSET', KEYS[8], field, now .. ':' .. math.min(tonumber(i), taken_in))
      end
    end
  end
end
redis.call('HSET', KEYS[8], from_field, now .. ':' .. (next_start or (tonumber(n) + 1)))
return reply or {'no_adjacent', tostring(redis.call('SCARD', KEYS[5]))}
