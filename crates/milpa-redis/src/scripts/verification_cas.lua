-- Replaces a verification request if nobody changed it since it was read, and files it
-- in the index its (new) status belongs to.
--
-- KEYS[1]  the request's hash: revision, status, record (JSON)
-- KEYS[2]  the pending index (ids scored by created_at_ms)
-- KEYS[3]  the resolved index (ids scored by resolved_at_ms)
-- ARGV[1]  the revision the caller read (decimal)
-- ARGV[2]  the revision to store (decimal, ARGV[1] + 1, computed by the caller so that
--          every u64 stays exact)
-- ARGV[3]  the new record (JSON, carrying ARGV[2] as its revision)
-- ARGV[4]  its status
-- ARGV[5]  retention in milliseconds (the TTL restarts on every change)
-- ARGV[6]  its id (its member in the indexes)
-- ARGV[7]  '1' when its status is final (it goes in KEYS[3]), '0' when pending (KEYS[2])
-- ARGV[8]  its score there: created_at_ms when pending, resolved_at_ms (0 without one)
--          when resolved
-- Returns 1 when replaced, 0 when the revision moved on or the request does not exist.
--
-- The index filing is verification_create.lua's (see there why the resolved index is
-- trimmed by age).

local revision = redis.call('HGET', KEYS[1], 'revision')
if revision ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'revision', ARGV[2], 'status', ARGV[4], 'record', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[5])

local home, other = KEYS[2], KEYS[3]
if ARGV[7] == '1' then
  home, other = KEYS[3], KEYS[2]
end
redis.call('ZADD', home, ARGV[8], ARGV[6])
redis.call('ZREM', other, ARGV[6])
local now = redis.call('TIME')
local cutoff = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) - tonumber(ARGV[5])
redis.call('ZREMRANGEBYSCORE', KEYS[3], 1, '(' .. string.format('%d', cutoff))
return 1
