-- Binding-checked, one-time redemption of a confirmation token.
--
-- KEYS[1]  the token's hash: binding (JSON), expires_at_ms, pending (JSON)
-- ARGV[1]  the presenter's binding, serialized exactly as it was at insert
-- ARGV[2]  now, in milliseconds since the Unix epoch
-- Returns the pending call (JSON) when redeemed, nil otherwise.
--
-- The order matters: an expired token is removed whoever presents it; a live token
-- presented by someone else (another tool, principal or channel) is left for its owner;
-- only the owner's presentation removes and returns it. Scripts run one at a time, so of
-- concurrent presentations exactly one finds the token.

local fields = redis.call('HMGET', KEYS[1], 'binding', 'expires_at_ms', 'pending')
if not fields[1] then
  return nil
end
local expires_at = tonumber(fields[2])
if expires_at == nil or not fields[3] then
  return redis.error_reply('ERR milpa: unreadable confirmation token')
end
if expires_at < tonumber(ARGV[2]) then
  redis.call('DEL', KEYS[1])
  return nil
end
if fields[1] ~= ARGV[1] then
  return nil
end
redis.call('DEL', KEYS[1])
return fields[3]
