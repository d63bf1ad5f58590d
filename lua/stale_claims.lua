-- stale_claims: an instant sale's claims still awaiting their record in the ledger past their
-- time in the active set (the replica that made them went away, or its ledger failed): the
-- sale's admitter records them.
-- KEYS: 1 active, 2 claims, 3 owners
-- ARGV: now_ms, most
-- REPLY: claim...: [attempt, user, serial]
-- Arguments: 1 now (ms), 2 the most to return
-- Returns three values per claim: its attempt, its user and its join serial.
local out, found = {}, 0
local claims = redis.call('HGETALL', KEYS[2])
for i = 1, #claims, 2 do
  if found >= tonumber(ARGV[2]) then break end
  local attempt = claims[i]
  local until_ms = redis.call('ZSCORE', KEYS[1], attempt)
  if not until_ms or tonumber(until_ms) < tonumber(ARGV[1]) then
    local user = redis.call('HGET', KEYS[3], attempt)
    if user then
      out[#out + 1], out[#out + 2], out[#out + 3] = attempt, user, claims[i + 1]
      found = found + 1
    end
  end
end
return out
