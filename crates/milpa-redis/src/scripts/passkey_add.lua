-- Enrols a passkey unless its credential id is taken.
-- KEYS[1] the credential's hash, KEYS[2] the actor's index (credential ids by enrolment time)
-- ARGV: actor, credential id, public credential, created_at_ms
-- Returns 1 when stored, 0 when the credential id was enrolled already.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'actor', ARGV[1], 'public_credential', ARGV[3], 'created_at_ms', ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[2])
return 1
