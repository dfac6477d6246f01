// The Lua scripts the Redis limiter runs. Each runs atomically on the
// server, so replicas never interleave a check with a take. The bucket
// arithmetic is Local's, in microseconds: Lua numbers are doubles, exact to
// 2^53, and Unix microseconds stay below that until the year 2255.
package limits

import "github.com/redis/go-redis/v9"

// Key layout under the prefix:
//
//	rpm:SCOPE              hash l (level), t (Unix µs): the requests bucket
//	tpm:SCOPE              hash l, t: the tokens bucket
//	budget:SCOPE:PERIOD    hash t (tokens), u (US dollars); PERIOD is the
//	                       period's first day, 2026-12-01
//
// A bucket lives a window past the time it drains; a budget lives a day past
// the end of its period.

// admitScript checks every scope and, only if all pass, takes one request
// and the reserved tokens from each.
//
// KEYS: per scope, rpm key, tpm key, budget key.
// ARGV: now (Unix µs), tokens; then per scope rpm, tpm, budget tokens,
// budget dollars, µs until the budget period ends.
//
// Returns: code (0 allowed, 1 rate limited, 2 budget spent), kind (1 rpm,
// 2 tpm, 3 budget tokens, 4 budget dollars), refusing scope (1-based),
// retry (µs), too large (0/1); then per scope rpm remaining, rpm reset (µs),
// tpm remaining, tpm reset (µs).
var admitScript = redis.NewScript(`
local W = 60000000
local EPS = 1e-6
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local ns = #KEYS / 3
local code, kind, who, retry, large = 0, 0, 0, 0, 0

local function refuse(c, k, i, r, big)
  if code == 2 and c ~= 2 then return end
  if code == c and r <= retry then return end
  code, kind, who, retry, large = c, k, i, r, big
end

local function load(key, limit)
  local v = redis.call('HMGET', key, 'l', 't')
  local l, t = tonumber(v[1]) or 0, tonumber(v[2]) or now
  if now > t then
    l = math.max(l - (now - t) * limit / W, 0)
    t = now
  end
  return l, t
end

local function drain(limit, l)
  if l <= 0 then return 0 end
  return math.ceil(l * W / limit)
end

local rl, rt, tl, tt = {}, {}, {}, {}
for i = 1, ns do
  local a = 2 + (i - 1) * 5
  local rpm, tpm = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local btok, busd = tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
  if btok > 0 or busd > 0 then
    local v = redis.call('HMGET', KEYS[3 * i], 't', 'u')
    local st, su = tonumber(v[1]) or 0, tonumber(v[2]) or 0
    local r = tonumber(ARGV[a + 5])
    if btok > 0 and st >= btok then
      refuse(2, 3, i, r, 0)
    elseif busd > 0 and su >= busd then
      refuse(2, 4, i, r, 0)
    end
  end
  if rpm > 0 then
    rl[i], rt[i] = load(KEYS[3 * i - 2], rpm)
    if rl[i] + 1 > rpm + EPS then
      refuse(1, 1, i, drain(rpm, rl[i] + 1 - rpm), 0)
    end
  end
  if tpm > 0 then
    tl[i], tt[i] = load(KEYS[3 * i - 1], tpm)
    if n > tpm then
      refuse(1, 2, i, W, 1)
    elseif tl[i] + n > tpm + EPS then
      refuse(1, 2, i, drain(tpm, tl[i] + n - tpm), 0)
    end
  end
end

local out = {code, kind, who, retry, large}
for i = 1, ns do
  local a = 2 + (i - 1) * 5
  local rpm, tpm = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local rrem, rres, trem, tres = 0, 0, 0, 0
  if rpm > 0 then
    local l = rl[i]
    if code == 0 then
      l = l + 1
      redis.call('HSET', KEYS[3 * i - 2], 'l', l, 't', rt[i])
      redis.call('PEXPIRE', KEYS[3 * i - 2], math.ceil(drain(rpm, l) / 1000) + W / 1000)
    end
    rrem, rres = math.floor(rpm - l + EPS), drain(rpm, l)
  end
  if tpm > 0 then
    local l = tl[i]
    if code == 0 and n > 0 then
      l = l + n
      redis.call('HSET', KEYS[3 * i - 1], 'l', l, 't', tt[i])
      redis.call('PEXPIRE', KEYS[3 * i - 1], math.ceil(drain(tpm, l) / 1000) + W / 1000)
    end
    trem, tres = math.floor(tpm - l + EPS), drain(tpm, l)
  end
  out[#out + 1] = rrem
  out[#out + 1] = rres
  out[#out + 1] = trem
  out[#out + 1] = tres
end
return out
`)

// settleScript applies a batch of settlements: adjustments to token buckets
// and additions to budgets, one per key.
//
// KEYS: the keys, in order.
// ARGV: four per key: "t", delta tokens, admitted at (Unix µs), tpm limit
// for a bucket; "b", tokens, dollars, time to live (ms) for a budget.
var settleScript = redis.NewScript(`
local W = 60000000
for i, key in ipairs(KEYS) do
  local a = (i - 1) * 4
  if ARGV[a + 1] == 't' then
    local d, at, lim = tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
    local v = redis.call('HMGET', key, 'l', 't')
    local l, t = tonumber(v[1]) or 0, tonumber(v[2]) or at
    if at > t then
      l = math.max(l - (at - t) * lim / W, 0)
      t = at
    end
    l = math.max(l + d, 0)
    if l > 0 or v[1] then
      redis.call('HSET', key, 'l', l, 't', t)
      redis.call('PEXPIRE', key, math.ceil(l * W / lim / 1000) + W / 1000)
    end
  else
    redis.call('HINCRBY', key, 't', ARGV[a + 2])
    if tonumber(ARGV[a + 3]) ~= 0 then
      redis.call('HINCRBYFLOAT', key, 'u', ARGV[a + 3])
    end
    redis.call('PEXPIRE', key, ARGV[a + 4])
  end
end
return #KEYS
`)

// seedScript raises a budget's spend to at least the given amounts.
//
// KEYS: the budget key. ARGV: tokens, dollars, time to live (ms).
var seedScript = redis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 't', 'u')
if tonumber(ARGV[1]) > (tonumber(v[1]) or 0) then
  redis.call('HSET', KEYS[1], 't', ARGV[1])
end
if tonumber(ARGV[2]) > (tonumber(v[2]) or 0) then
  redis.call('HSET', KEYS[1], 'u', ARGV[2])
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`)
