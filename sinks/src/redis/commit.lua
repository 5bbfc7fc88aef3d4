-- The Redis store's commit: one script, so atomic. See the module documentation of
-- sinks/src/redis/mod.rs for what it does.
--
-- KEYS[1] is the job's commit hash, KEYS[2] its owner hash; KEYS[4i-1], KEYS[4i], KEYS[4i+1]
-- and KEYS[4i+2] are list i's sorted set, meta hash, its window's groups sorted set and its
-- trend hash. ARGV[1..5] are epoch, watermark, committed_at, the number of
-- lists and the committing handle's generation ('' when it never claimed the job); then, per
-- list: window, window_start, window_end, revision, state, final, as_of, watermark, exact,
-- error_bound, sketch_found, sketch_of, sketch_max_overcount, sketch_total_overcount (the
-- four '' when the list has no sketch check), item_count, group ('' for a global list),
-- certificate_threshold, certificate_counted, certificate_passes (the three '' when the list
-- has no certificate), rank_by ('trend' for a trend list, '' for a count-ranked one),
-- followed by item_count (score, member) pairs and, for a trend list, item_count trend records
-- (JSON, in rank order: field 1, 2, … of the trend hash). KEYS[4n+3] is the job's hot-key hash; after the lists' arguments come the
-- batch's latest hot-key window: window_start, window_end, watermark, as_of, key_count, keys
-- (JSON), or a single '' when the batch has none. KEYS[4n+4] is the job's set of windows with
-- ranges, and KEYS[4n+3+2w], KEYS[4n+4+2w] are the ranges hash and starts sorted set of the
-- w-th window with ranges; after the hot-key arguments come the number of such windows and,
-- per window, its name, its number of instances e and e (start, value) pairs (value: the
-- instance's ranges as JSON, see sinks/src/redis/ranges.rs).
-- Returns 1 when committed, 0 when skipped. Damaged data is reported as an
-- error reply with the code HOTLIST_CORRUPT; a generation that is no longer the job's as
-- HOTLIST_TAKEN_OVER <the job's generation>; arguments that are not what the client sends as
-- HOTLIST_INVALID (the client checked them before: a mismatched client and script).

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
local function invalid(msg)
  return redis.error_reply('HOTLIST_INVALID ' .. msg)
end
-- The sketch check's fields, in argument order.
local SKETCH = {'sketch_found', 'sketch_of', 'sketch_max_overcount', 'sketch_total_overcount'}
-- The certificate's fields, in argument order.
local CERTIFICATE = {'certificate_threshold', 'certificate_counted', 'certificate_passes'}
-- Checks list i's accuracy arguments (ARGV[q + 8 ..], the certificate's ARGV[q + 16 ..]) as the
-- reader will; nil when valid.
local function bad_accuracy(q)
  local exact, bound = ARGV[q + 8], ARGV[q + 9]
  if exact ~= '0' and exact ~= '1' then return 'exact ' .. exact .. ' is not 0 or 1' end
  if not is_int(bound) or string.sub(bound, 1, 1) == '-' then return 'error_bound ' .. bound .. ' is not a count' end
  if exact == '1' and bound ~= '0' then return 'an exact list has error_bound ' .. bound end
  local given = 0
  for x = 0, 3 do
    local v = ARGV[q + 10 + x]
    if v ~= '' then
      if not is_int(v) or string.sub(v, 1, 1) == '-' then return SKETCH[x + 1] .. ' ' .. v .. ' is not a count' end
      given = given + 1
    end
  end
  if given ~= 0 and given ~= 4 then return 'the sketch check is partial' end
  if given == 4 and cmp(ARGV[q + 10], ARGV[q + 11]) > 0 then return 'sketch_found exceeds sketch_of' end
  given = 0
  for x = 0, 2 do
    local v = ARGV[q + 16 + x]
    if v ~= '' then
      if not is_int(v) or string.sub(v, 1, 1) == '-' then return CERTIFICATE[x + 1] .. ' ' .. v .. ' is not a count' end
      given = given + 1
    end
  end
  if given ~= 0 and given ~= 3 then return 'the certificate is partial' end
  if given == 3 then
    if cmp(ARGV[q + 16], '1') < 0 then return 'certificate_threshold is not positive' end
    if cmp(ARGV[q + 18], '1') < 0 then return 'certificate_passes is not positive' end
    if exact ~= '1' or ARGV[q + 4] ~= 'final' then return 'a certificate on a list that is not exact and final' end
  end
  return nil
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
  local zkey, mkey, gkey, tkey = KEYS[4 * i - 1], KEYS[4 * i], KEYS[4 * i + 1], KEYS[4 * i + 2]
  err = bad_type(zkey, 'zset') or bad_type(mkey, 'hash') or bad_type(gkey, 'zset') or bad_type(tkey, 'hash')
  if err then return corrupt(err) end
  local old = redis.call('HGET', mkey, 'window_start')
  local newer = true
  if old then
    if not is_int(old) then return corrupt(mkey .. ' field window_start is not an integer') end
    newer = cmp(ARGV[p + 1], old) >= 0
  end
  local bad = bad_accuracy(p)
  if bad then return invalid(ARGV[p] .. ': ' .. bad) end
  local rank_by = ARGV[p + 19]
  if rank_by ~= '' and rank_by ~= 'trend' then return invalid(ARGV[p] .. ': rank_by ' .. rank_by) end
  if newer then writes[#writes + 1] = {i, p} end
  local items = tonumber(ARGV[p + 14])
  p = p + 20 + 2 * items
  if rank_by == 'trend' then p = p + items end
end
-- the hot-key window: written if it starts at or after the stored one
local hkey = KEYS[4 * n + 3]
local hot = nil
if ARGV[p] ~= '' then
  err = bad_type(hkey, 'hash')
  if err then return corrupt(err) end
  for x = 0, 4 do
    if not is_int(ARGV[p + x]) then return invalid('hot-key window field ' .. x .. ' is not an integer') end
  end
  local old = redis.call('HGET', hkey, 'window_start')
  if old and not is_int(old) then return corrupt(hkey .. ' field window_start is not an integer') end
  if not old or cmp(ARGV[p], old) >= 0 then hot = p end
end
-- the sealed instances' ranges: every instance's replaces what is stored for it
local r = p + 1
if ARGV[p] ~= '' then r = p + 6 end
local skey = KEYS[4 * n + 4]
err = bad_type(skey, 'set')
if err then return corrupt(err) end
-- (the value is RANGES_KEPT of sinks/src/redis/ranges.rs, put here when the script loads)
local RANGES_KEPT = 10000
local ranges = {}
for w = 1, tonumber(ARGV[r]) do
  local q = r + 1
  err = bad_type(KEYS[4 * n + 3 + 2 * w], 'hash') or bad_type(KEYS[4 * n + 4 + 2 * w], 'zset')
  if err then return corrupt(err) end
  local e = tonumber(ARGV[q + 1])
  for x = 0, e - 1 do
    local start = ARGV[q + 2 + 2 * x]
    if not is_int(start) then return invalid('ranges of ' .. ARGV[q] .. ': start ' .. start .. ' is not an integer') end
  end
  ranges[#ranges + 1] = {w, q}
  r = q + 1 + 2 * e
end

-- Phase 2: writes.
for _, w in ipairs(writes) do
  local i, q = w[1], w[2]
  local zkey, mkey, gkey, tkey = KEYS[4 * i - 1], KEYS[4 * i], KEYS[4 * i + 1], KEYS[4 * i + 2]
  redis.call('DEL', zkey, mkey, tkey)
  local count = tonumber(ARGV[q + 14])
  local first = q + 20
  redis.call('ZADD', gkey, ARGV[q + 1], ARGV[q + 15])
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
    'exact', ARGV[q + 8], 'error_bound', ARGV[q + 9],
    'item_count', ARGV[q + 14], 'epoch', ARGV[1], 'group', ARGV[q + 15])
  if ARGV[q + 10] ~= '' then
    redis.call('HSET', mkey, SKETCH[1], ARGV[q + 10], SKETCH[2], ARGV[q + 11],
      SKETCH[3], ARGV[q + 12], SKETCH[4], ARGV[q + 13])
  end
  if ARGV[q + 16] ~= '' then
    redis.call('HSET', mkey, CERTIFICATE[1], ARGV[q + 16], CERTIFICATE[2], ARGV[q + 17],
      CERTIFICATE[3], ARGV[q + 18])
  end
  if ARGV[q + 19] == 'trend' then
    redis.call('HSET', mkey, 'rank_by', 'trend')
    -- the trend records, in rank order: field r is the item at rank r
    local records = first + 2 * count
    j = 0
    while j < count do
      local m = math.min(count - j, 1000)
      local args = {}
      for x = 0, m - 1 do
        args[2 * x + 1] = string.format('%d', j + x + 1)
        args[2 * x + 2] = ARGV[records + j + x]
      end
      redis.call('HSET', tkey, unpack(args))
      j = j + m
    end
  end
end
-- Retention (sinks/src/retention.rs): in each window written, drop the lists of the groups
-- whose latest instance ended before the window's newest instance started (score + size <
-- newest), so rotating group values do not pile up keys; the global list's key is kept.
local sizes = {}
for _, w in ipairs(writes) do
  local i, q = w[1], w[2]
  sizes[KEYS[4 * i + 1]] = tonumber(ARGV[q + 2]) - tonumber(ARGV[q + 1])
end
for gkey, size in pairs(sizes) do
  local top = redis.call('ZRANGE', gkey, -1, -1, 'WITHSCORES')
  if top[2] then
    local horizon = '(' .. string.format('%d', tonumber(top[2]) - size)
    local old = redis.call('ZRANGEBYSCORE', gkey, '-inf', horizon)
    local base = string.sub(gkey, 1, #gkey - #'groups')
    for _, m in ipairs(old) do
      if m ~= '' then
        local z = base .. 'group:' .. m .. ':latest'
        redis.call('DEL', z, z .. ':meta', z .. ':trend')
      end
    end
    if #old > 0 then redis.call('ZREMRANGEBYSCORE', gkey, '-inf', horizon) end
  end
end
if hot then
  redis.call('DEL', hkey)
  redis.call('HSET', hkey, 'window_start', ARGV[hot], 'window_end', ARGV[hot + 1],
    'watermark', ARGV[hot + 2], 'as_of', ARGV[hot + 3], 'key_count', ARGV[hot + 4],
    'keys', ARGV[hot + 5], 'epoch', ARGV[1])
end
for _, x in ipairs(ranges) do
  local w, q = x[1], x[2]
  local rkey, zkey = KEYS[4 * n + 3 + 2 * w], KEYS[4 * n + 4 + 2 * w]
  local e = tonumber(ARGV[q + 1])
  local j = 0
  while j < e do
    local m = math.min(e - j, 1000)
    local values, starts = {}, {}
    for y = 0, m - 1 do
      local start = ARGV[q + 2 + 2 * (j + y)]
      values[2 * y + 1], values[2 * y + 2] = start, ARGV[q + 3 + 2 * (j + y)]
      starts[2 * y + 1], starts[2 * y + 2] = start, start
    end
    redis.call('HSET', rkey, unpack(values))
    redis.call('ZADD', zkey, unpack(starts))
    j = j + m
  end
  -- the newest RANGES_KEPT instances per window (sinks/src/redis/ranges.rs): memory stays
  -- bounded, as Redis keeps no older lists either
  local over = redis.call('ZCARD', zkey) - RANGES_KEPT
  while over > 0 do
    local old = redis.call('ZRANGE', zkey, 0, math.min(over, 1000) - 1)
    redis.call('HDEL', rkey, unpack(old))
    redis.call('ZREM', zkey, unpack(old))
    over = over - #old
  end
  redis.call('SADD', skey, ARGV[q])
end
redis.call('HSET', KEYS[1], 'epoch', ARGV[1], 'watermark', ARGV[2], 'committed_at', ARGV[3])
return 1
