-- waiting_of: a user's waiting attempt in a sale and its place, for support staff who find a
-- buyer by user id (waiting attempts live here only). Reads only: asking for a user is not
-- their sign of life.
-- KEYS: 1 meta, 2 seq, 3 gone
-- ARGV: user
-- REPLY: attempt?, position?, waiting?
-- Arguments: 1 user id
-- Returns {} when the user does not wait, else {attempt (32 hex), position, how many wait}.
local head = queue_head()
local attempt, serial = waiting_entry(ARGV[1], head)
if not attempt then return {} end
return {attempt, position_of(head, serial, KEYS[3]), waiting_count(head, KEYS[2], KEYS[3])}
