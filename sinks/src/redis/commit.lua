-- The Redis store's commit: one script, so atomic. See the module documentation of
-- sinks/src/redis/mod.rs for what it does.
--
-- KEYS[1] is the job's commit hash, KEYS[2] its owner hash; KEYS[2i+1] and KEYS[2i+2] are list
-- i's sorted set and meta hash. ARGV[1..5] are epoch, watermark, committed_at, the number of
-- lists and the committing handle's generation ('' when it never claimed the job); then, per
-- list: window, window_start, window_end, revision, state, final, as_of, watermark,
-- item_count, followed by item_count (score, member) pairs. Returns 1 when committed, 0 when
-- skipped. Damaged data is reported as an error reply with the code HOTLIST_CORRUPT; a
-- generation that is no longer the job's as HOTLIST_TAKEN_OVER <the job's generation>.

local function corrupt(msg)
  return redis.error_reply('HOTLIST_CORRUPT ' .. msg)
end
local function is_int(s)
  return string.match(s, '^%-?%d+$') ~= nil
end
-- Compares canonical decimal integers exactly (Lua numbers are doubles).
local function cmp(a, b)
  local na, nb = string.sub(a, 1, 1) == '-', string.sub(b, 1, 1) == '-'
  if na ~= nb then
    if na then return -1 else return 1 end
  end
  local r = 0
  if #a ~= #b then
    if #a < #b then r = -1 else r = 1 end
  elseif a ~= b then
    if a < b then r = -1 else r = 1 end
  end
  if na then r = -r end
  return r
end
local function bad_type(key, want)
  local t = redis.call('TYPE', key)['ok']
  if t ~= 'none' and t ~= want then
    return key .. ' is a ' .. t .. ', not a ' .. want
  end
  return nil
end

-- Phase 1: checks and decisions, no writes.
local err = bad_type(KEYS[1], 'hash') or bad_type(KEYS[2], 'hash')
if err then return corrupt(err) end
if ARGV[5] ~= '' then
  local g = redis.call('HGET', KEYS[2], 'generation')
  if g ~= ARGV[5] then return redis.error_reply('HOTLIST_TAKEN_OVER ' .. (g or '0')) end
end
local stored = redis.call('HGET', KEYS[1], 'epoch')
if stored then
  if not is_int(stored) then return corrupt(KEYS[1] .. ' field epoch is not an integer') end
  if cmp(ARGV[1], stored) <= 0 then return 0 end
end
local n = tonumber(ARGV[4])
local writes = {}
local p = 6
for i = 1, n do
  local zkey, mkey = KEYS[2 * i + 1], KEYS[2 * i + 2]
  err = bad_type(zkey, 'zset') or bad_type(mkey, 'hash')
  if err then return corrupt(err) end
  local old = redis.call('HGET', mkey, 'window_start')
  local newer = true
  if old then
    if not is_int(old) then return corrupt(mkey .. ' field window_start is not an integer') end
    newer = cmp(ARGV[p + 1], old) >= 0
  end
  if newer then writes[#writes + 1] = {i, p} end
  p = p + 9 + 2 * tonumber(ARGV[p + 8])
end

-- Phase 2: writes.
for _, w in ipairs(writes) do
  local i, q = w[1], w[2]
  local zkey, mkey = KEYS[2 * i + 1], KEYS[2 * i + 2]
  redis.call('DEL', zkey, mkey)
  local count = tonumber(ARGV[q + 8])
  local first = q + 9
  local j = 0
  while j < count do
    local m = math.min(count - j, 1000)
    local args = {}
    for x = 0, m - 1 do
      args[2 * x + 1] = ARGV[first + 2 * (j + x)]
      args[2 * x + 2] = ARGV[first + 2 * (j + x) + 1]
    end
    redis.call('ZADD', zkey, unpack(args))
    j = j + m
  end
  redis.call('HSET', mkey, 'window', ARGV[q], 'window_start', ARGV[q + 1],
    'window_end', ARGV[q + 2], 'revision', ARGV[q + 3], 'state', ARGV[q + 4],
    'final', ARGV[q + 5], 'as_of', ARGV[q + 6], 'watermark', ARGV[q + 7],
    'item_count', ARGV[q + 8], 'epoch', ARGV[1])
end
redis.call('HSET', KEYS[1], 'epoch', ARGV[1], 'watermark', ARGV[2], 'committed_at', ARGV[3])
return 1
