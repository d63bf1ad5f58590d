-- seat_changes: what changed among a sale's seats since the version a replica's seat map
-- has (lua/lib/seatlog.lua), so the map is kept by one small call per interval.
-- KEYS: 1 meta, 2 seatlog
-- ARGV: since, epoch
-- REPLY: known, version, epoch, whole, changes[]
-- Arguments: 1 the version the reader has, 2 the epoch it read it in ('' for none)
-- Returns {known (1/0), version, epoch, whole (1: the log cannot bring the reader's version
--         up to date, read the holdings whole), {changes after `since`, oldest first}}.
local meta = redis.call('HMGET', KEYS[1], 'stock_initialised', 'version', 'epoch', 'seatlog_from')
if not meta[1] then return {0, 0, '', 1, {}} end
local version, epoch = tonumber(meta[2] or '0'), meta[3] or ''
local since, from = tonumber(ARGV[1]), tonumber(meta[4] or '0')
if epoch ~= ARGV[2] or since < from or since > version then
  return {1, version, epoch, 1, {}}
end
if since == version then return {1, version, epoch, 0, {}} end
-- The log's entries are in version order: read from its end back to `since`, a page a call.
local changes, stop, page = {}, -1, 256
while true do
  local entries = redis.call('LRANGE', KEYS[2], stop - page + 1, stop)
  local older = false
  for k = #entries, 1, -1 do
    if tonumber(string.match(entries[k], '^(%d+)')) <= since then older = true break end
    changes[#changes + 1] = entries[k]
  end
  if older or #entries < page then break end
  stop = stop - page
end
local ordered = {}
for k = #changes, 1, -1 do ordered[#ordered + 1] = changes[k] end
return {1, version, epoch, 0, ordered}
