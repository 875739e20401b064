-- Replaces a credential's public part if it belongs to the actor.
-- KEYS[1] the credential's hash; ARGV: actor, public credential. Returns 1 or 0.
if redis.call('HGET', KEYS[1], 'actor') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'public_credential', ARGV[2])
return 1
