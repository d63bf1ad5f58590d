-- A sale of named seats keeps a log of its seats' changes (`seatlog`: a list, oldest first,
-- of "<version>|<letter>|<seat,seat>", the letter the seats' state after the change: h held,
-- f free, s sold, x withdrawn), so that each replica's seat map reads only what changed since
-- the version it has (lua/seat_changes.lua), one store call however many buyers look.
-- Prepended to the scripts that change seats (so it is written once). The log keeps the last
-- SEATLOG_KEEP changes; meta.seatlog_from is the version below which changes may be missing
-- (a reader from before it reads the whole holdings instead). meta.seats_moved_at is the
-- version at which free seats last changed (taken, freed, withdrawn; not a held seat sold):
-- best available's cursors (lua/hold_best.lua) hold until then.

local SEATLOG_KEEP = 4096

-- Logs that `seats` ("A-1-1,A-1-2") are now `letter`, at meta's version (bumped before).
local function log_seats(meta, log, letter, seats)
  local version = redis.call('HGET', meta, 'version') or '0'
  if letter ~= 's' then redis.call('HSET', meta, 'seats_moved_at', version) end
  local n = redis.call('RPUSH', log, version .. '|' .. letter .. '|' .. seats)
  if n > SEATLOG_KEEP then
    local dropped = redis.call('LPOP', log)
    redis.call('HSET', meta, 'seatlog_from', string.match(dropped, '^(%d+)'))
  end
end

-- Starts the log anew at meta's version: the holdings were rebuilt, readers read them whole.
local function reset_seatlog(meta, log)
  local version = redis.call('HGET', meta, 'version') or '0'
  redis.call('DEL', log)
  redis.call('HSET', meta, 'seatlog_from', version, 'seats_moved_at', version)
end
