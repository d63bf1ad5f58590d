-- refresh: what each replica's view of a sale's waiting line is refreshed from, one call per
-- sale per replica per refresh interval (src/service/line): the line's numbering (epoch), its
-- head and last serial, the departures out of turn the caller has not seen, the sale's figures;
-- and, in the same call, the signs of life that replica gathered since its last refresh (those
-- past one call's share go before it, lua/seen.lua).
-- KEYS: 1 meta, 2 seq, 3 gone, 4 seen, 5 departed, 6 stock, 7 seats, 8 holds
-- ARGV: presence, epoch, departed, most, seen...
-- REPLY: known, epoch, head, last, waiting, measured_rate, configured_rate, rebuilt_at_ms, status, sold_out, from, drawn_from, first_drawn, last_drawn, departures...
-- Arguments: 1 '1' when presence is tracked (abandonment is on), 2 the caller's epoch, 3 how many
--       departures of that epoch the caller has, 4 the most departures to send, then the
--       serials seen (waiting users who asked)
-- Returns {known (1/0), epoch, head, last serial, waiting, measured rate, configured rate,
--          rebuilt_at_ms, status ('' when unknown), sold out (1/0), from (the index in the
--          departure log of the first one sent: 0 when the caller's epoch (or the one the
--          lottery's draw made this one from) or count no longer holds, so it starts again),
--          the numbering the lottery's draw made this one from, the
--          first and the last serial it renumbered ('', 0, 0 when this numbering is not the
--          draw's; lua/lottery.lua), then the departures}
local meta = redis.call('HMGET', KEYS[1], 'stock_initialised', 'epoch', 'head', 'measured_rate',
  'rate_per_minute', 'rebuilt_at_ms', 'status', 'kind', 'renumbered')
local epoch = meta[2] or ''
if ARGV[1] == '1' then write_signs_of_life(KEYS[4], ARGV[2], 5) end
local known, empty = 0, 0
if meta[1] then
  known = 1
  empty = sold_out(meta[8], KEYS[6], KEYS[7], KEYS[8])
end
local head = head_of(meta[3])
local logged = redis.call('LLEN', KEYS[5])
local drawn_from, first, last = '', 0, 0
if meta[9] then
  local before, after, f, l = string.match(meta[9], '^(%S*) (%S+) (%d+) (%d+)$')
  if after == epoch then drawn_from, first, last = before, f, l end
end
-- The departure log goes on across the lottery's draw (the drawn keep the places they held
-- between them, and the places gone stay gone): a caller of the numbering it was made from
-- keeps its count. Another numbering starts the log again.
local from = tonumber(ARGV[3])
local same_log = epoch == ARGV[2] or (drawn_from ~= '' and drawn_from == ARGV[2])
if not same_log or from > logged then from = 0 end
local reply = {known, epoch, head, last_serial(KEYS[2]), waiting_count(head, KEYS[2], KEYS[3]),
  meta[4] or '0', meta[5] or '0', meta[6] or '0', meta[7] or '', empty, from, drawn_from, first,
  last}
if from < logged then
  local sent = redis.call('LRANGE', KEYS[5], from, from + tonumber(ARGV[4]) - 1)
  for _, serial in ipairs(sent) do reply[#reply + 1] = serial end
end
return reply
