"""The Lua helpers with which the Redis scripts keep a session's info and the prefix's
catalog in step (see ``_catalog``); part of every script's prelude (``_scripts``).

A write script run with the prefix's set of all sessions as its last key (KEYS: 4n + 1) finds
``catalog`` set to the catalog keys' common start, ``<prefix>catalog:``, and files the session
it writes in the sets its owner and tags name, scored by its ``updated_at``; a script run with
a session's four keys only (on a Redis Cluster, where those sets lie in other slots) keeps the
info hash alone. Times are whole microseconds since the epoch, as decimal text: a score, an
``updated_at`` and a cursor compare exactly.

A write with a ttl also files the session in ``<prefix>catalog:expiry``, scored by when its
keys expire (milliseconds of the server's clock): where a sweep looks for sessions that
expired (``_catalog_scripts``). A score there is only where to look: a sweep checks the keys.
"""

from __future__ import annotations

__all__ = ["INDEX_HELPERS"]

INDEX_HELPERS = r"""
local catalog = false
if #KEYS % 4 == 1 and string.sub(KEYS[#KEYS], -11) == 'catalog:all' then
  catalog = string.sub(KEYS[#KEYS], 1, -4)
end
local function id_at(i)
  return string.sub(KEYS[i], #catalog - 6, -7)
end
local function sets_of(cat, owner, tags)
  local sets = {cat .. 'all'}
  if owner then sets[#sets + 1] = cat .. 'owner:' .. owner end
  if tags then
    local ok, list = pcall(cjson.decode, tags)
    if ok and type(list) == 'table' then
      for _, tag in ipairs(list) do sets[#sets + 1] = cat .. 'tag:' .. tostring(tag) end
    end
  end
  return sets
end
local function unusable(keys, kind)
  for _, key in ipairs(keys) do
    local found = redis.call('TYPE', key).ok
    if found ~= 'none' and found ~= kind then return {-2, key, found} end
  end
  return nil
end
local function file(sets, score, id)
  for _, key in ipairs(sets) do redis.call('ZADD', key, score, id) end
end
local function unfile(sets, id)
  for _, key in ipairs(sets) do redis.call('ZREM', key, id) end
end
local function label(id, owner, tags)
  if owner or tags then
    redis.call('HSET', catalog .. 'labels', id, (owner or '') .. '\0' .. (tags or ''))
  else
    redis.call('HDEL', catalog .. 'labels', id)
  end
end
local function filed(i)
  local info = redis.call('HMGET', KEYS[i + 1], 'owner', 'tags')
  local sets = sets_of(catalog, info[1], info[2])
  return sets, unusable(sets, 'zset') or unusable({catalog .. 'labels'}, 'hash')
end
local function server_ms()
  local clock = redis.call('TIME')
  return tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
end
local function file_expiry(id, due)
  -- pcall: the set only tells a sweep where to look, so a key of another type there must
  -- not fail the write (the sweep reports it)
  redis.pcall('ZADD', catalog .. 'expiry', string.format('%.0f', due), id)
end
local function unindex(i)
  if not catalog then return nil end
  local sets, refused = filed(i)
  if refused then return refused end
  unfile(sets, id_at(i))
  redis.call('HDEL', catalog .. 'labels', id_at(i))
  redis.pcall('ZREM', catalog .. 'expiry', id_at(i))
  return nil
end
local function iso_us(text)
  if type(text) ~= 'string' then return nil end
  local y, mo, d, h, mi, s, frac, sign, oh, om = string.match(text,
    '^(%d%d%d%d)%-(%d%d)%-(%d%d)T(%d%d):(%d%d):(%d%d)%.?(%d*)([%+%-])(%d%d):(%d%d)$')
  if not y then return nil end
  y, mo = tonumber(y), tonumber(mo)
  if mo <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local doy = math.floor((153 * ((mo + 9) % 12) + 2) / 5) + tonumber(d) - 1
  local days = era * 146097 + yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  local offset = (tonumber(oh) * 60 + tonumber(om)) * 60
  if sign == '-' then offset = -offset end
  local seconds = (days - 719468) * 86400 + tonumber(h) * 3600 + tonumber(mi) * 60
    + tonumber(s) - offset
  return string.format('%.0f', seconds * 1000000 + tonumber(string.sub(frac .. '000000', 1, 6)))
end
local function record_us(key, index)
  local record = redis.pcall('LINDEX', key, index)
  if type(record) ~= 'string' then return nil end
  local ok, data = pcall(cjson.decode, record)
  if ok and type(data) == 'table' then return iso_us(data['created_at']) end
  return nil
end
local function seconds_us(text)
  local seconds = tonumber(text)
  if not seconds or seconds ~= seconds or math.abs(seconds) > 1e12 then return nil end
  return string.format('%.0f', seconds * 1000000)
end
local function created(stored, msgs, before, now)
  if stored then return stored end
  if before > 0 then return record_us(msgs, 0) or now end
  return now
end
local function describe(msgs, info)
  local f = redis.pcall('HMGET', info, 'updated_at', 'count', 'title', 'owner', 'tags',
    'created_at', 'updated')
  if failed(f) then return nil end
  local updated, count, made = f[1], f[2], f[6]
  if not updated then
    count = redis.pcall('LLEN', msgs)
    if type(count) ~= 'number' or count == 0 then return nil end
    made = record_us(msgs, 0)
    updated = seconds_us(f[7]) or record_us(msgs, -1) or made
    made = made or updated
  end
  return {count or redis.call('LLEN', msgs), updated or false, f[3] or false, f[4] or false,
    f[5] or false, made or false}
end
"""
"""Defines ``catalog`` and ``id_at(i)`` (the id of the session at ``KEYS[i..i+3]``);
``sets_of(cat, owner, tags)`` (the sets a session is filed in), ``unusable(keys, kind)`` (a
refusal when a key holds another type), ``file``/``unfile`` (add to / remove from sets),
``label`` (the labels entry: owner and tags, to unfile a session that expired),
``filed(i)``/``unindex(i)`` (a session's sets, checked / removed), ``server_ms()`` (the
server's clock, in ms) and ``file_expiry(id, due)`` (the session's place in the ``expiry``
set: when its keys are due to expire); ``iso_us``, ``record_us``
and ``seconds_us`` (a message's ``created_at``, or the previous layout's ``updated``
seconds, as microseconds), ``created`` (the ``created_at`` a write keeps: the stored one, else
the first message's for a session of the previous layout, else now), and ``describe(msgs,
info)`` (a session's info as ``{count, updated_at, title, owner, tags, created_at}``, from
its messages for a session of the previous layout; ``nil`` when never written)."""
