-- GCRA consume: the same arithmetic as milpa::rate_limit::Gcra::charge, in nanoseconds.
--
-- KEYS[1]  the budget's key; its value is the theoretical arrival time (TAT) as decimal
--          nanoseconds since the Unix epoch.
-- ARGV[1]  interval: nanoseconds one token costs (window / max_tokens, at least 1)
-- ARGV[2]  window: nanoseconds a full budget takes to refill
-- ARGV[3]  interval * cost, in nanoseconds
-- ARGV[4]  "" to use the server's clock (TIME, so every replica agrees), or a time in
--          nanoseconds since the epoch (tests hold the arithmetic to Gcra with it)
-- Returns {1, remaining tokens} when charged, {0, retry after in nanoseconds} when not.
--
-- Lua numbers are doubles: exact for integers below 2^53 (about 104 days in nanoseconds),
-- but an epoch time in nanoseconds is about 2^60. So times are kept as (seconds,
-- nanoseconds) pairs and only their difference, which is at most a window, is computed
-- as one number. The caller refuses windows of 2^53 ns or more.

local function split(text)
  local digits = string.len(text)
  if digits <= 9 then
    return 0, tonumber(text)
  end
  return tonumber(string.sub(text, 1, digits - 9)), tonumber(string.sub(text, digits - 8))
end

-- floor(a / b) for non-negative integers below 2^53, corrected for the rounding of `/`.
local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

local interval = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])

local now_s, now_ns
if ARGV[4] == '' then
  local time = redis.call('TIME')
  now_s = tonumber(time[1])
  now_ns = tonumber(time[2]) * 1000
else
  now_s, now_ns = split(ARGV[4])
end

-- How far the stored TAT is ahead of now (0 for a fresh or refilled key): max(tat, now) - now.
local ahead = 0
local stored = redis.call('GET', KEYS[1])
if stored then
  local tat_s, tat_ns = split(stored)
  if tat_s == nil or tat_ns == nil then
    return redis.error_reply('ERR milpa: unreadable GCRA state')
  end
  ahead = (tat_s - now_s) * 1000000000 + (tat_ns - now_ns)
  if ahead < 0 then
    ahead = 0
  end
end

-- The new TAT, relative to now.
local next_ahead = ahead + cost
if next_ahead > window then
  return {0, next_ahead - window}
end

local remaining = idiv(window - next_ahead, interval)
if next_ahead == 0 then
  -- Fully refilled (a free call on an idle key): nothing to remember.
  redis.call('DEL', KEYS[1])
else
  local total = now_ns + next_ahead
  local carry = idiv(total, 1000000000)
  local tat = string.format('%d%09d', now_s + carry, total - carry * 1000000000)
  -- Forgotten once fully refilled, which is when the TAT is reached.
  local ttl_ms = math.ceil(next_ahead / 1000000)
  redis.call('SET', KEYS[1], tat, 'PX', ttl_ms)
end
return {1, remaining}
