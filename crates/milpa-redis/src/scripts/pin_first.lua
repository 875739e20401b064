-- Pins a definition unless its key is pinned already: one script, so of replicas pinning
-- one key at once exactly one pins and the others read its pin back.
-- KEYS[1] the pin's hash (digest, definition, pinned_at_ms)
-- ARGV: digest, definition (JSON text), pinned_at_ms
-- Returns nil when pinned now, else the standing pin's digest, definition and pinned_at_ms.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.call('HMGET', KEYS[1], 'digest', 'definition', 'pinned_at_ms')
end
redis.call('HSET', KEYS[1], 'digest', ARGV[1], 'definition', ARGV[2], 'pinned_at_ms', ARGV[3])
return false
