-- One rate-limit check, atomic (Redis runs a script alone): every limit of the request
-- is admitted or none is (ADR 0021).
--
-- KEYS[i]          the sorted set of limit i: members are admissions, scores their
--                  instant in microseconds of Redis's own clock
-- ARGV[2i-1]       the window of limit i, microseconds
-- ARGV[2i]         the max of limit i
-- ARGV[2n+1]       the member of this admission, unique across replicas
--
-- Returns {0, 0} when admitted, else {i, retry_after_us} for the full limit whose
-- oldest admission leaves its window last.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local n = #KEYS
local refused, retry = 0, -1
for i = 1, n do
  local window = tonumber(ARGV[2 * i - 1])
  local max = tonumber(ARGV[2 * i])
  -- An admission at `now - window` or before has left the window.
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - window)
  if redis.call('ZCARD', KEYS[i]) >= max then
    local wait = window
    local oldest = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')
    if oldest[2] then
      wait = tonumber(oldest[2]) + window - now
    end
    if wait > retry then
      refused, retry = i, wait
    end
  end
end
if refused > 0 then
  return {refused, retry}
end
local member = ARGV[2 * n + 1]
for i = 1, n do
  local window = tonumber(ARGV[2 * i - 1])
  local max = tonumber(ARGV[2 * i])
  redis.call('ZADD', KEYS[i], now, member)
  -- A limit lowered by a reload: keep only the newest `max`.
  local extra = redis.call('ZCARD', KEYS[i]) - max
  if extra > 0 then
    redis.call('ZREMRANGEBYRANK', KEYS[i], 0, extra - 1)
  end
  -- Nothing in the set matters once a window has passed since its newest admission.
  redis.call('PEXPIRE', KEYS[i], math.max(1, math.ceil(window / 1000)))
end
return {0, 0}
