import { createHash } from 'node:crypto';

/** A Lua script run by its SHA-1 (EVALSHA), sent whole (EVAL) when the server does not have it yet. */
export interface Script {
  readonly name: string;
  readonly source: string;
  readonly sha: string;
}

function script(name: string, source: string): Script {
  return { name, source, sha: createHash('sha1').update(source).digest('hex') };
}

/**
 * Every script reads the time from Redis (TIME), never from the caller: the nodes' clocks may
 * differ, the server's is one. Redis 3.2 to 4 replicate a script that reads the time only as
 * its effects, which they must be asked for; from 5 on that is the default and the call a no-op.
 */
const NOW = `
if redis.replicate_commands then redis.replicate_commands() end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
`;

/**
 * A token bucket (hash: tokens, at) refilled at `rate` per second up to `burst`, of which up to
 * `want` tokens are taken (0: only looks). A missing key is a full bucket, so the key expires
 * once it would have refilled: idle buckets vanish.
 *
 * KEYS[1] the bucket; ARGV rate (tokens per second), burst, want.
 * Returns { tokens taken, ms until the next token (0 if one is left) }.
 */
export const TAKE_TOKENS = script(
  'take-tokens',
  `${NOW}
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1])
local at = tonumber(state[2])
if tokens == nil or at == nil then
  tokens = burst
else
  tokens = math.min(burst, tokens + math.max(0, now - at) * rate / 1000)
end
local taken = 0
if want > 0 then
  taken = math.min(want, math.floor(tokens))
  tokens = tokens - taken
  redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
  redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) * 1000 / rate) + 1000)
end
local wait = 0
if tokens < 1 then wait = math.ceil((1 - tokens) * 1000 / rate) end
return { taken, wait }
`,
);

/**
 * Connection slots as leases: a sorted set of lease ids scored by when they expire. Expired
 * leases (their holder died or lost Redis) are dropped first; then as many of the offered ids as
 * there are free slots are added. The key expires with the last lease.
 *
 * KEYS[1] the slots; ARGV limit, lease ms, ids offered….
 * Returns the ids granted.
 */
export const ACQUIRE_LEASES = script(
  'acquire-leases',
  `${NOW}
local limit = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local free = limit - redis.call('ZCARD', KEYS[1])
local granted = {}
for i = 3, #ARGV do
  if free <= 0 then break end
  redis.call('ZADD', KEYS[1], now + ttl, ARGV[i])
  granted[#granted + 1] = ARGV[i]
  free = free - 1
end
if #granted > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
return granted
`,
);

/**
 * Extends leases still held; a lease that expired meanwhile (its slot may be another node's
 * now) is not taken back.
 *
 * KEYS[1] the slots; ARGV lease ms, ids….
 * Returns the ids that were lost.
 */
export const RENEW_LEASES = script(
  'renew-leases',
  `${NOW}
local ttl = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local lost = {}
local kept = 0
for i = 2, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], now + ttl, ARGV[i])
    kept = kept + 1
  else
    lost[#lost + 1] = ARGV[i]
  end
end
if kept > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
return lost
`,
);

/**
 * Failures in a sliding window: a sorted set of failure ids scored by their time. With an id,
 * records one failure; then counts those within the window. The key expires with the window.
 *
 * KEYS[1] the failures; ARGV window ms, id to record ('' to only count).
 * Returns the failures within the window.
 */
export const COUNT_FAILURES = script(
  'count-failures',
  `${NOW}
local window = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if ARGV[2] ~= '' then
  redis.call('ZADD', KEYS[1], now, ARGV[2])
  redis.call('PEXPIRE', KEYS[1], window)
end
return redis.call('ZCARD', KEYS[1])
`,
);
