-- Reads the verification requests a list found in an index, in one round trip, and
-- removes the members whose request is gone.
--
-- KEYS[1]       the index read (pending or resolved)
-- KEYS[2..n+1]  the requests' hashes, in the index's order
-- ARGV[1]       '1' when KEYS[1] is the resolved index, '0' when it is the pending one
-- ARGV[2..n+1]  the requests' ids (their members in KEYS[1])
-- Returns one entry per request: its record (JSON), or false when its hash has expired
-- (or, after a race with a change, its status no longer belongs in this index); such
-- members are removed from KEYS[1] (the scripts that change a request file it anew).

local resolved = ARGV[1] == '1'
local found = {}
for i = 2, #KEYS do
  local fields = redis.call('HMGET', KEYS[i], 'status', 'record')
  local status, record = fields[1], fields[2]
  if status and record and ((status ~= 'pending') == resolved) then
    found[i - 1] = record
  else
    redis.call('ZREM', KEYS[1], ARGV[i])
    found[i - 1] = false
  end
end
return found
