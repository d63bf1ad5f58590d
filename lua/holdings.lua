-- holdings: one page of what the store holds of a sale besides its queue, for the drift
-- checker to compare with the ledger's snapshot. A sale's holdings are read a page a call, so
-- that reading a sale of 100,000 holds or buyers never blocks Redis's one thread for more than
-- a page; every page carries meta.version, and the reader takes the pages as one moment only
-- when the version reads the same after the last (the version counts every change).
-- KEYS: 1 meta, 2 stock, 3 seats, 4 active, 5 holds, 6 bought, 7 unrecorded
-- ARGV: part, cursor, page
-- REPLY: known, version, kind, next, items[], units, unrecorded: [admitted...: [attempt, serial, user, deadline_ms]]
-- Arguments: 1 part: 'first' (the free units and the admission batch not yet recorded), 'seats'
--       (free seats, SSCAN), 'active' (the active set, ZSCAN, each with its hold record) or
--       'bought' (units per user, HSCAN); 2 the scan's cursor ('0' first); 3 page size.
--       Scans, not ranks: a deadline moved (a checkout's) changes no version, and would move
--       an attempt from one page of ranks to another; a scan returns every member that stays.
-- Returns {known (1/0), version, kind, next cursor ('0': the part is read), {items}, free units,
--          {unrecorded: attempt, serial, user, deadline, ...}}; items are seats, or
--          {attempt, hold record ('' for none), ...}, or {user, units, ...}
local meta = redis.call('HMGET', KEYS[1], 'stock_initialised', 'version', 'kind')
if not meta[1] then return {0, 0, '', '0', {}, 0, {}} end
local version, kind = tonumber(meta[2] or '0'), meta[3] or 'quantity'
local part, cursor, count = ARGV[1], ARGV[2], tonumber(ARGV[3])
if part == 'first' then
  return {1, version, kind, '0', {}, tonumber(redis.call('GET', KEYS[2]) or '0'),
    redis.call('LRANGE', KEYS[7], 0, -1)}
elseif part == 'seats' then
  local page = redis.call('SSCAN', KEYS[3], cursor, 'COUNT', count)
  return {1, version, kind, page[1], page[2], 0, {}}
elseif part == 'bought' then
  local page = redis.call('HSCAN', KEYS[6], cursor, 'COUNT', count)
  return {1, version, kind, page[1], page[2], 0, {}}
elseif part == 'active' then
  local page = redis.call('ZSCAN', KEYS[4], cursor, 'COUNT', count)
  local items = {}
  for i = 1, #page[2], 2 do
    local attempt = page[2][i]
    items[#items + 1] = attempt
    items[#items + 1] = redis.call('HGET', KEYS[5], attempt) or ''
  end
  return {1, version, kind, page[1], items, 0, {}}
end
return redis.error_reply('unknown holdings part ' .. tostring(part))
