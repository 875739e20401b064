-- Replaces a verification request if nobody changed it since it was read.
--
-- KEYS[1]  the request's hash: revision, status, record (JSON)
-- ARGV[1]  the revision the caller read (decimal)
-- ARGV[2]  the revision to store (decimal, ARGV[1] + 1, computed by the caller so that
--          every u64 stays exact)
-- ARGV[3]  the new record (JSON, carrying ARGV[2] as its revision)
-- ARGV[4]  its status
-- ARGV[5]  retention in milliseconds (the TTL restarts on every change)
-- Returns 1 when replaced, 0 when the revision moved on or the request does not exist.

local revision = redis.call('HGET', KEYS[1], 'revision')
if revision ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'revision', ARGV[2], 'status', ARGV[4], 'record', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
