-- Creates a verification request unless its id is taken, and files it in the index its
-- status belongs to.
--
-- KEYS[1]  the request's hash: revision, status, record (JSON)
-- KEYS[2]  the pending index (ids scored by created_at_ms)
-- KEYS[3]  the resolved index (ids scored by resolved_at_ms)
-- ARGV[1]  the record (JSON)
-- ARGV[2]  its status
-- ARGV[3]  retention in milliseconds (the key's TTL)
-- ARGV[4]  its revision (decimal; 0 for a new request)
-- ARGV[5]  its id (its member in the indexes)
-- ARGV[6]  '1' when its status is final (it goes in KEYS[3]), '0' when pending (KEYS[2])
-- ARGV[7]  its score there: created_at_ms when pending, resolved_at_ms (0 without one)
--          when resolved
-- Returns nil when created, or the existing request's status.
--
-- The index filing below is the same in verification_cas.lua (a script cannot call
-- another): the member moves to the index of its status, and the resolved index drops
-- the requests resolved longer ago than the retention, on Redis's clock. Those have
-- expired (a request's TTL restarts with its last change, normally its resolution), and
-- the resolved list, newest first, would otherwise never reach them to clean them up.
-- Score 0 (resolved without a time) is left to the lists' own cleanup.

local existing = redis.call('HGET', KEYS[1], 'status')
if existing then
  return existing
end
redis.call('HSET', KEYS[1], 'revision', ARGV[4], 'status', ARGV[2], 'record', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])

local home, other = KEYS[2], KEYS[3]
if ARGV[6] == '1' then
  home, other = KEYS[3], KEYS[2]
end
redis.call('ZADD', home, ARGV[7], ARGV[5])
redis.call('ZREM', other, ARGV[5])
local now = redis.call('TIME')
local cutoff = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) - tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[3], 1, '(' .. string.format('%d', cutoff))
return nil
