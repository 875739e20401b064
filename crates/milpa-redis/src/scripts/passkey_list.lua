-- The passkeys of one actor, oldest first: a flat array of id, public credential, created.
-- KEYS[1] the actor's index; ARGV[1] the credential key prefix.
local out = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local fields = redis.call('HMGET', ARGV[1] .. id, 'public_credential', 'created_at_ms')
  if fields[1] then
    table.insert(out, id)
    table.insert(out, fields[1])
    table.insert(out, fields[2])
  end
end
return out
