"""The Lua scripts of ``fork`` and ``undo`` on the Redis sessions (see ``_edits``): each
atomic and one round trip, over the prelude and conventions of ``_scripts``."""

from __future__ import annotations

from ._scripts import Script

__all__ = ["FORK", "FORK_SOURCE", "FORK_TARGET", "UNDO"]


# Helpers of the scripts that look into records: `find_last` scans a list from its end, a page
# at a time, decoding only the records whose text holds `needle` (a record with that field
# holds it verbatim, as aniki writes JSON) to compare their `field`; it returns the position
# found, or false, or nil and the position of a record holding the needle that is not JSON.
_RECORDS = """
local function find_last(i, needle, field, value)
  local high = redis.call('LLEN', KEYS[i]) - 1
  while high >= 0 do
    local low = math.max(0, high - 255)
    local records = redis.call('LRANGE', KEYS[i], low, high)
    for j = #records, 1, -1 do
      if string.find(records[j], needle, 1, true) then
        local ok, data = pcall(cjson.decode, records[j])
        if not ok then return nil, low + j - 1 end
        if type(data) == 'table' and data[field] == value then return low + j - 1 end
      end
    end
    high = low - 1
  end
  return false
end
local function push(key, list)
  for from = 1, #list, 1000 do
    redis.call('RPUSH', key, unpack(list, from, math.min(from + 999, #list)))
  end
end
"""

# A fork's two halves. ARGV: version, token (the new session's gen, unique to this call), now
# (whole microseconds), ttl ms, then, for the source: the id to copy through ('' for all), that
# id as JSON text (the needle), and the meta keys not copied. `snapshot` reads the source at
# KEYS[s..s+3]: its records, meta pairs and labels ({title, owner, tags, whether it was ever
# written}), or nil and a refusal ({-4}: no message has the id). `vacant` says whether the
# target at KEYS[t..t+3] may be written: nil, or {1} when this very fork was applied before (a
# resend: its token is the gen), or {-5} when the target holds messages. `fill` writes the fork
# there (or returns a refusal, writing nothing): the target's meta is replaced, its batch tokens
# kept (they guard its resends), its info made anew with the source's labels, created and
# updated now, and, with the catalog, the target filed under its new labels and counted among
# the holders of each blob its records name (after releasing what the ledger of the target,
# which holds no records, still names: those of records that expired).
_FORK_HALVES = """
local function snapshot(s)
  local last = redis.call('LLEN', KEYS[s]) - 1
  if ARGV[5] ~= '' then
    local found, bad = find_last(s, ARGV[6], 'id', ARGV[5])
    if bad then return nil, {-3, KEYS[s], bad} end
    if not found then return nil, {-4} end
    last = found
  end
  local records = {}
  if last >= 0 then records = redis.call('LRANGE', KEYS[s], 0, last) end
  local skipped = {}
  for j = 7, #ARGV do skipped[ARGV[j]] = true end
  local stored, meta = redis.call('HGETALL', KEYS[s + 2]), {}
  for j = 1, #stored, 2 do
    if not skipped[stored[j]] then
      meta[#meta + 1] = stored[j]
      meta[#meta + 1] = stored[j + 1]
    end
  end
  local labels = redis.call('HMGET', KEYS[s + 1], 'title', 'owner', 'tags', 'updated_at')
  return records, meta, labels
end
local function vacant(t)
  if redis.call('HGET', KEYS[t + 1], 'gen') == ARGV[2] then return {1} end
  if redis.call('LLEN', KEYS[t]) > 0 then return {-5} end
  return nil
end
local function fill(t, records, meta, labels)
  local before, sets, refused = {}, {}, nil
  if catalog then
    before, refused = filed(t)
    if refused then return refused end
    sets = sets_of(catalog, labels[2], labels[3])
    refused = unusable(sets, 'zset')
    if refused then return refused end
  end
  if blob_base then
    refused = unusable({session_key(id_at(t), 'blobs')}, 'set')
    if refused then return refused end
    lapse(id_at(t))
  end
  redis.call('DEL', KEYS[t + 2])
  if #records == 0 and #meta == 0 and not labels[4] then return nil end
  push(KEYS[t], records)
  for from = 1, #meta, 1000 do
    redis.call('HSET', KEYS[t + 2], unpack(meta, from, math.min(from + 999, #meta)))
  end
  redis.call('HDEL', KEYS[t + 1], 'title', 'owner', 'tags')
  redis.call('HSET', KEYS[t + 1], 'v', ARGV[1], 'gen', ARGV[2], 'updated_at', ARGV[3],
    'created_at', ARGV[3], 'count', #records)
  for j, field in ipairs({'title', 'owner', 'tags'}) do
    if labels[j] then redis.call('HSET', KEYS[t + 1], field, labels[j]) end
  end
  if catalog then
    unfile(before, id_at(t))
    file(sets, ARGV[3], id_at(t))
    label(id_at(t), labels[2], labels[3])
  end
  if blob_base then take_refs(id_at(t), named(records), tonumber(ARGV[4])) end
  refresh(tonumber(ARGV[4]), t)
  return nil
end
"""

# KEYS: the source's four, then the target's four (another id, so, on a Redis Cluster, most
# often another slot: there FORK_SOURCE and FORK_TARGET do the same in two steps), and, to keep
# the catalog, the prefix's set of all sessions. Copies the source (through the message ARGV[5]
# names) into the empty target, in one step. Returns {0, the source's gen, how many records
# were copied}, {1} for a resend, or a refusal.
FORK = Script.of(
    """
local records, meta, labels = snapshot(1)
if not records then return meta end
local refused = fill(5, records, meta, labels)
if refused then return refused end
return {0, redis.call('HGET', KEYS[2], 'gen') or '', #records}
""",
    helpers=_RECORDS + _FORK_HALVES,
    refuse="check_all() or vacant(5)",
)

# KEYS: the source's four. ARGV: as FORK's. The first step of a fork across slots: {0, the
# source's gen, its records through ARGV[5], its meta pairs but the skipped, its labels (title,
# owner, tags, updated_at: each '' when absent)}, or a refusal.
FORK_SOURCE = Script.of(
    """
local records, meta, labels = snapshot(1)
if not records then return meta end
for j = 1, 4 do labels[j] = labels[j] or '' end
return {0, redis.call('HGET', KEYS[2], 'gen') or '', records, meta, labels}
""",
    helpers=_RECORDS + _FORK_HALVES,
    refuse="check_all()",
)

# KEYS: the target's four (and the set of all sessions, to keep the catalog). ARGV: version,
# token, now, ttl ms, the source's labels as FORK_SOURCE gave them (four texts), the number of
# meta texts (pairs times two), the meta texts, then the records. The second step: {0}, {1}
# for a resend, or a refusal ({-5}: the target holds messages by now).
FORK_TARGET = Script.of(
    """
local labels = {}
for j = 1, 4 do labels[j] = ARGV[4 + j] ~= '' and ARGV[4 + j] end
local split = 10 + tonumber(ARGV[9])
local meta, records = {}, {}
for j = 10, split - 1 do meta[#meta + 1] = ARGV[j] end
for j = split, #ARGV do records[#records + 1] = ARGV[j] end
local refused = fill(1, records, meta, labels)
if refused then return refused end
return {0}
""",
    helpers=_RECORDS + _FORK_HALVES,
    refuse="check_all() or vacant(1)",
)

# ARGV: version, token (unique to this call), now (whole milliseconds), ttl ms, now (whole
# microseconds). Removes the records from the last user message on and returns {0, them, the
# gen before, the length before, the gen after}; the gen becomes the token, so every
# instance's cache starts over. The info's count and updated_at follow, and so do the
# catalog's scores when its set of all sessions is the last key. The blobs the removed records
# name are released, and their bytes returned as (hash, bytes) pairs after the gen after.
# The token joins the batch tokens: a resend of an undo applied before returns {1} instead of
# removing another turn. With no user message, nothing changes: {0, {}, gen, length, gen}.
UNDO = Script.of(
    """
if redis.call('ZSCORE', KEYS[4], ARGV[2]) then return {1} end
local gen = redis.call('HGET', KEYS[2], 'gen') or ''
local count = redis.call('LLEN', KEYS[1])
local start, bad = find_last(1, '"user"', 'role', 'user')
if bad then return {-3, KEYS[1], bad} end
if not start then return {0, {}, gen, count, gen} end
local removed = redis.call('LRANGE', KEYS[1], start, -1)
for j = 2, #removed do
  if not pcall(cjson.decode, removed[j]) then return {-3, KEYS[1], start + j - 1} end
end
local sets = false
if catalog then
  local labels = redis.call('HMGET', KEYS[2], 'owner', 'tags')
  sets = sets_of(catalog, labels[1], labels[2])
  local refused = unusable(sets, 'zset')
  if refused then return refused end
end
local made = created(redis.call('HGET', KEYS[2], 'created_at'), KEYS[1], count, ARGV[5])
local counts, blobs = {}, {}
if blob_base then
  counts = named(removed)
  blobs = blob_data(counts)
  drop_refs(id_at(1), counts)
end
if start == 0 then
  redis.call('DEL', KEYS[1])
else
  redis.call('LTRIM', KEYS[1], 0, start - 1)
end
redis.call('HSET', KEYS[2], 'v', ARGV[1], 'gen', ARGV[2], 'updated_at', ARGV[5], 'count', start,
  'created_at', made)
if sets then file(sets, ARGV[5], id_at(1)) end
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[2])
redis.call('ZREMRANGEBYRANK', KEYS[4], 0, -33)
refresh(tonumber(ARGV[4]))
return {0, removed, gen, count, ARGV[2], blobs}
""",
    helpers=_RECORDS,
    refuse="check_all()",
)
