-- seen: signs of life a replica gathered for a sale's waiting line beyond what its refresh
-- call carries (lua/refresh.lua), written in calls of their own so that no one call holds
-- Redis for long (src/service/line).
-- KEYS: 1 meta, 2 seen
-- ARGV: epoch, serials...
-- REPLY: nothing
-- Arguments: 1 the numbering (epoch) the serials are of, then the serials
write_signs_of_life(KEYS[2], ARGV[1], 2)
return 0
