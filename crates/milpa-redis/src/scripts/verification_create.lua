-- Creates a verification request unless its id is taken.
--
-- KEYS[1]  the request's hash: revision, status, record (JSON)
-- ARGV[1]  the record (JSON)
-- ARGV[2]  its status
-- ARGV[3]  retention in milliseconds (the key's TTL)
-- ARGV[4]  its revision (decimal; 0 for a new request)
-- Returns nil when created, or the existing request's status.

local existing = redis.call('HGET', KEYS[1], 'status')
if existing then
  return existing
end
redis.call('HSET', KEYS[1], 'revision', ARGV[4], 'status', ARGV[2], 'record', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return nil
