-- Takes a one-time enrolment: its actor if it has not expired at ARGV[1] (the caller's
-- clock); the key is deleted either way, so a token serves once.
-- KEYS[1] the enrolment's hash (actor, expires_at_ms).
local fields = redis.call('HMGET', KEYS[1], 'actor', 'expires_at_ms')
redis.call('DEL', KEYS[1])
if fields[1] and tonumber(fields[2]) > tonumber(ARGV[1]) then
  return fields[1]
end
return false
