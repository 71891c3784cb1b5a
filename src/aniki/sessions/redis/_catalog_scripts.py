"""The Lua scripts of a Redis store's catalog (see ``_catalog``): a session's info, its
``set_info``, a page of the listing, a batch of a prune, a batch of the sweep of sessions
that expired, and the one-time back-fill of a prefix the previous layout wrote. Each atomic
and one round trip, over the prelude of ``_scripts`` (whose ``_index_lua`` helpers keep the
sets in step).

The listing, prune, sweep and back-fill scripts run over catalog keys (KEYS: the set they read
and, but for the sweep, the layout marker) and reach each session's keys by name, built from
the prefix (ARGV[2]): they serve a single Redis server (on a Redis Cluster the catalog is not
kept).
"""

from __future__ import annotations

from ._scripts import Script

__all__ = ["BACKFILL", "INFO", "LIST", "NOT_MIGRATED", "PRUNE", "SET_INFO", "SWEEP"]

NOT_MIGRATED = -6
"""A listing's or a prune's status when the prefix's layout marker is absent: back-fill first."""

# KEYS: a session's four. ARGV: version. {0, {count, updated_at, title, owner, tags,
# created_at}} (absent fields nil), or {0, nil} for a session never written.
INFO = Script.of(
    "return {0, describe(KEYS[1], KEYS[2]) or false}\n",
    refuse="check_all()",
)

# KEYS: a session's four, and the set of all sessions to keep the catalog. ARGV: version, ttl
# ms, now (whole microseconds), then for title, owner and tags each an op ('' keep, 's' set,
# 'd' remove) and a value (tags as a JSON list). A write: updated_at moves, created_at is set
# on the first, the session is filed under its new owner and tags, and the ttl refreshed; a
# session holding no records releases what its ledger still names first (see `lapse`).
SET_INFO = Script.of(
    """
local old = redis.call('HMGET', KEYS[2], 'owner', 'tags', 'created_at')
local owner, tags = old[1], old[2]
if ARGV[6] == 's' then owner = ARGV[7] elseif ARGV[6] == 'd' then owner = false end
if ARGV[8] == 's' then tags = ARGV[9] elseif ARGV[8] == 'd' then tags = false end
if catalog then
  local before, after = sets_of(catalog, old[1], old[2]), sets_of(catalog, owner, tags)
  local refused = unusable(before, 'zset') or unusable(after, 'zset')
    or unusable({catalog .. 'labels'}, 'hash')
  if refused then return refused end
  unfile(before, id_at(1))
  file(after, ARGV[3], id_at(1))
  label(id_at(1), owner, tags)
end
if blob_base then lapse(id_at(1)) end
for j, field in ipairs({'title', 'owner', 'tags'}) do
  local op = ARGV[2 + 2 * j]
  if op == 's' then
    redis.call('HSET', KEYS[2], field, ARGV[3 + 2 * j])
  elseif op == 'd' then
    redis.call('HDEL', KEYS[2], field)
  end
end
local count = redis.call('LLEN', KEYS[1])
redis.call('HSET', KEYS[2], 'v', ARGV[1], 'updated_at', ARGV[3], 'count', count,
  'created_at', created(old[3], KEYS[1], count, ARGV[3]))
refresh(tonumber(ARGV[2]))
return {0}
""",
    refuse="check_all()",
)

# Helpers of the scripts over a catalog. `forget` takes a session that is gone (expired) out
# of every set its labels name and of the expiry set, drops the labels and releases the blobs
# it named; `tagged` says whether a tags list holds a tag; `after` whether id a sorts after id
# b byte by byte (Python's order of str).
_CATALOG = r"""
local cat = ARGV[2] .. 'catalog:'
blob_base = ARGV[2] .. 'blob:'
local function keys_of(id)
  local base = ARGV[2] .. '{' .. id .. '}:'
  return base .. 'msgs', base .. 'info', base .. 'meta', base .. 'batches'
end
local function forget(id)
  redis.call('ZREM', KEYS[1], id)
  local labels = redis.pcall('HGET', cat .. 'labels', id)
  local owner, tags = false, false
  if type(labels) == 'string' then
    local cut = string.find(labels, '\0', 1, true)
    if cut and cut > 1 then owner = string.sub(labels, 1, cut - 1) end
    if cut and cut < #labels then tags = string.sub(labels, cut + 1) end
    redis.call('HDEL', cat .. 'labels', id)
  end
  for _, key in ipairs(sets_of(cat, owner, tags)) do redis.pcall('ZREM', key, id) end
  redis.pcall('ZREM', cat .. 'expiry', id)
  lapse(id)
end
local function tagged(tags, tag)
  if not tags then return false end
  local ok, list = pcall(cjson.decode, tags)
  if not ok or type(list) ~= 'table' then return false end
  for _, each in ipairs(list) do
    if each == tag then return true end
  end
  return false
end
local function after(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  return #a > #b
end
local function migrated()
  if redis.call('EXISTS', KEYS[2]) == 0 then return {-6} end
  return unusable({KEYS[1]}, 'zset')
end
"""

# KEYS: the set listed (all sessions, an owner's or a tag's), the layout marker. ARGV:
# version, prefix, which set it is ('all', 'owner' or 'tag'), owner ('' any), tag ('' any),
# the lower bound ('-inf', or '(' and updated_after), the position to continue after (score
# and id; '' from the start), page size. Reads the members past the position, newest first and
# ties by id (a group of equal scores is read whole), and returns {0, 1 when the set is read
# to its end, the position reached (score, id), the infos found: {id, count, updated_at,
# title, owner, tags, created_at}}. A member whose session is gone (expired) is removed from
# every set; one filed under an owner or a tag it no longer has, from that set.
LIST = Script.of(
    """
local found = {}
local function take(id)
  local msgs, info = keys_of(id)
  local described = describe(msgs, info)
  if not described then return forget(id) end
  local owns = ARGV[4] == '' or described[4] == ARGV[4]
  local has = ARGV[5] == '' or tagged(described[5], ARGV[5])
  if (ARGV[3] == 'owner' and not owns) or (ARGV[3] == 'tag' and not has) then
    redis.call('ZREM', KEYS[1], id)
  elseif owns and has then
    table.insert(described, 1, id)
    found[#found + 1] = described
  end
end
local high, last_score, last_id = '+inf', ARGV[7], ARGV[8]
if ARGV[7] ~= '' then
  high = '(' .. ARGV[7]
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[7], ARGV[7])) do
    if after(id, ARGV[8]) then take(id) end
  end
end
local size = tonumber(ARGV[9])
local page = redis.call('ZREVRANGEBYSCORE', KEYS[1], high, ARGV[6], 'WITHSCORES', 'LIMIT', 0,
  size)
local j = 1
while j <= #page do
  local score, group = page[j + 1], {}
  while j <= #page and page[j + 1] == score do
    table.insert(group, 1, page[j])
    j = j + 2
  end
  if j > #page and #page == 2 * size then
    group = redis.call('ZRANGEBYSCORE', KEYS[1], score, score)
  end
  for _, id in ipairs(group) do take(id) end
  last_score, last_id = score, group[#group] or last_id
end
local done = 0
if #page < 2 * size then done = 1 end
return {0, done, last_score, last_id, found}
""",
    helpers=_CATALOG,
    refuse="migrated()",
)

# KEYS: the set read (all sessions, or an owner's), the layout marker. ARGV: version, prefix,
# owner ('' any), the upper bound ('(' and the cut-off, or '+inf'), the cut-off ('' none),
# batch size. Removes, whole, each of the first `batch size` sessions of the set last written
# before the cut-off (of the owner): its four keys, its place in every set, and its references
# to blobs (a blob no other session names goes with it). Returns {0, sessions removed, members
# read}; each member read leaves the range (removed, or rescored when its session was written
# since), so the next batch starts where this one ended.
PRUNE = Script.of(
    """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[4], 'LIMIT', 0, tonumber(ARGV[6]))
local removed = 0
for _, id in ipairs(ids) do
  local msgs, info, meta, batches = keys_of(id)
  local described = describe(msgs, info)
  if not described then
    forget(id)
  elseif ARGV[3] ~= '' and described[4] ~= ARGV[3] then
    redis.call('ZREM', KEYS[1], id)
  elseif ARGV[5] ~= '' and described[2] and tonumber(described[2]) >= tonumber(ARGV[5]) then
    redis.call('ZADD', KEYS[1], described[2], id)
  else
    for _, key in ipairs(sets_of(cat, described[4], described[5])) do
      redis.pcall('ZREM', key, id)
    end
    redis.call('ZREM', KEYS[1], id)
    redis.pcall('ZREM', cat .. 'expiry', id)
    redis.pcall('HDEL', cat .. 'labels', id)
    release(id)
    redis.call('DEL', msgs, info, meta, batches)
    removed = removed + 1
  end
end
return {0, removed, #ids}
""",
    helpers=_CATALOG,
    refuse="migrated()",
)

# KEYS: the expiry set. ARGV: version, prefix, batch size. Reads the first `batch size` sessions
# due to expire by now (the server's clock) and checks each against its keys: one whose info
# hash and messages are both gone expired, and is forgotten (out of every set, the blobs it
# named released: a blob another session names stays); one written since is rescored to when
# its keys expire now; one kept without expiry since leaves the set. Returns {0, sessions
# forgotten, members read}; each member read leaves the range, so the next batch starts where
# this one ended. A session written again under its id after it expired has its keys back:
# it is rescored or leaves the set, never forgotten (its first write released the references
# of the records that expired, so those it holds now are its own).
SWEEP = Script.of(
    """
local now = server_ms()
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now), 'LIMIT', 0,
  tonumber(ARGV[3]))
local forgotten = 0
for _, id in ipairs(ids) do
  local msgs, info = keys_of(id)
  local left = math.max(redis.call('PTTL', info), redis.call('PTTL', msgs))
  if left == -1 then
    redis.call('ZREM', KEYS[1], id)
  elseif left >= 0 then
    redis.call('ZADD', KEYS[1], string.format('%.0f', now + left), id)
  else
    forget(id)
    forgotten = forgotten + 1
  end
end
return {0, forgotten, #ids}
""",
    helpers=_CATALOG,
    refuse="unusable({KEYS[1]}, 'zset')",
)

# KEYS: the set of all sessions. ARGV: version, prefix, ids... Files each session the previous
# layout wrote (messages, no updated_at) with its count and times from its messages (created:
# the first one's; updated: the old `updated` field, else the last one's). Returns {0, how
# many were filed}. A session a newer write has filed meanwhile is left as it is.
BACKFILL = Script.of(
    """
local refused = unusable({KEYS[1]}, 'zset')
if refused then return refused end
local filed = 0
for j = 3, #ARGV do
  local msgs, info = keys_of(ARGV[j])
  if redis.call('TYPE', info).ok == 'hash' and not redis.call('HGET', info, 'updated_at') then
    local described = describe(msgs, info)
    if described and described[2] then
      redis.call('HSET', info, 'updated_at', described[2], 'created_at', described[6],
        'count', described[1])
      redis.call('ZADD', KEYS[1], described[2], ARGV[j])
      filed = filed + 1
    end
  end
end
return {0, filed}
""",
    helpers=_CATALOG,
)
