"""The Lua scripts of the Redis sessions: one per operation, each atomic and one round trip.

Every script runs over a session's four keys (``KEYS``: msgs, info, meta, batches; see
``_core``; a fork's over two sessions' eight), a write also over the prefix's set of all
sessions when it keeps the catalog (see ``_index_lua``), with the schema version as
``ARGV[1]``, and starts from the same prelude of helpers (but for the append of records that
name no attachment, ``_plain``, which defines the helpers of its rare paths only on them). A
script is sent once and then run by its SHA-1 digest.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ._blob_lua import BLOB_HELPERS
from ._index_lua import INDEX_HELPERS

__all__ = [
    "APPEND",
    "APPEND_AFTER",
    "APPEND_READ",
    "APPEND_READ_AFTER",
    "CLEAR",
    "GET_META",
    "READ",
    "READ_AFTER_APPEND",
    "REPLACE",
    "SET_META",
    "SWAP_META",
    "TAIL",
    "Script",
]


@dataclass(frozen=True, slots=True)
class Script:
    """A Lua script, run by its SHA-1 digest once the server has it."""

    source: str
    """The Lua text."""
    sha: str
    """Its SHA-1 digest, as EVALSHA wants it."""

    @classmethod
    def of(cls, body: str, *, helpers: str = "", refuse: str = "") -> Script:
        """The script running ``body`` after the prelude and ``helpers``; with ``refuse`` (a
        Lua expression giving a refusal or nil, such as ``check_all()``), returning its
        refusal before the body runs."""
        check = f"local refused = {refuse}\nif refused then return refused end\n" if refuse else ""
        return cls.bare(_PRELUDE + helpers + check + body)

    @classmethod
    def bare(cls, source: str) -> Script:
        """The script ``source`` as it is, with no prelude (it defines what it uses)."""
        return cls(source, hashlib.sha1(source.encode()).hexdigest())


# KEYS: msgs, info, meta, batches (a fork declares the target session's four after the
# source's). ARGV[1]: the schema version. A refused call returns {-2, key, type} when a key holds
# another type, {-1, version, info key} when the data is newer and {-3, key, position} when a
# record an undo or a fork must read is not JSON, always before its first write (a script that
# fails halfway keeps what it wrote). The hot scripts (append and read) check a key by the first
# command that touches it, run with pcall; the rest check every key up front with TYPE.
_REFUSALS = """
local function failed(reply)
  return type(reply) == 'table' and reply.err ~= nil
end
local function refuse(i, reply)
  if string.find(reply.err, 'WRONGTYPE', 1, true) then
    return {-2, KEYS[i], redis.call('TYPE', KEYS[i]).ok}
  end
  return reply
end
local function newer(stored, i)
  if not stored then return nil end
  local version = tonumber(stored)
  if not version then return {-2, KEYS[i or 2], 'hash'} end
  if version > tonumber(ARGV[1]) then return {-1, stored, KEYS[i or 2]} end
  return nil
end
"""
"""Defines ``failed(reply)``, ``refuse(i, reply)`` and ``newer(stored, i)``: how a script
tells a refusal apart and makes one (the plain append's too, see ``_plain``)."""

_PRELUDE = (
    _REFUSALS
    + """local kinds = {'list', 'hash', 'hash', 'zset'}
local function check_all()
  for i = 1, #KEYS - #KEYS % 4 do
    local kind = redis.call('TYPE', KEYS[i]).ok
    if kind ~= 'none' and kind ~= kinds[(i - 1) % 4 + 1] then return {-2, KEYS[i], kind} end
  end
  for i = 2, #KEYS - #KEYS % 4, 4 do
    local refused = newer(redis.call('HGET', KEYS[i], 'v'), i)
    if refused then return refused end
  end
  return nil
end
"""
    + INDEX_HELPERS
    + BLOB_HELPERS
)

# ARGV (from `first` on): the number of blobs, a (hash, how many records name it, bytes) triple
# per blob, then the records. Before them: version, token (unique to this call), now (whole
# microseconds: the updated_at), now (whole milliseconds), ttl ms. The token becomes the
# gen of a new session, and is remembered among the last 32 batches: redis-py resends a command
# after a timeout or a dropped connection, and a batch the server already applied must not be
# appended twice. The batch's score is an integer, which Redis parses several times faster
# than a fraction. Returns a
# refusal, or nil, the new length, the gen and whether the batch was applied now. With `after`
# (an id, or '' for none), the batch goes only after the message with that id (an encrypted
# session's chain): when another is last, or none, {2} is returned and nothing is written.
# The info hash gets the new count and times, and the catalog's sets the new score, in step;
# each blob is stored unless it is already, and counted once more per record naming it (see
# ``_blob_lua``). An append to an empty list first releases the blobs the ledger still names:
# those of records that expired.
_APPEND_BATCH = """
local function records_from(first)
  return first + 1 + 3 * tonumber(ARGV[first])
end
local function follows(after)
  local last = redis.pcall('LINDEX', KEYS[1], -1)
  if failed(last) then return refuse(1, last) end
  if not last and after == '' then return nil end
  if last and after ~= '' then
    local ok, data = pcall(cjson.decode, last)
    if ok and type(data) == 'table' and data['id'] == after then return nil end
  end
  return {2}
end
local function append(first, after)
  local from, blobs = records_from(first), {}
  for j = first + 1, from - 1, 3 do blobs[#blobs + 1] = blob_base .. ARGV[j] end
  local seen = redis.pcall('ZSCORE', KEYS[4], ARGV[2])
  if failed(seen) then return refuse(4, seen) end
  local info = redis.pcall('HMGET', KEYS[2], 'v', 'gen', 'created_at', 'owner', 'tags')
  if failed(info) then return refuse(2, info) end
  local refused = newer(info[1])
  if refused then return refused end
  local count
  if seen then
    count = redis.pcall('LLEN', KEYS[1])
    if failed(count) then return refuse(1, count) end
    return nil, count, info[2], false
  end
  refused = after and follows(after)
  if refused then return refused end
  local sets = catalog and sets_of(catalog, info[4], info[5])
  refused = (sets and unusable(sets, 'zset')) or (#blobs > 0 and
    (unusable(blobs, 'hash') or unusable({session_key(id_at(1), 'blobs')}, 'set')))
  if refused then return refused end
  count = redis.pcall('RPUSH', KEYS[1], unpack(ARGV, from, math.min(from + 999, #ARGV)))
  if failed(count) then return refuse(1, count) end
  for next_from = from + 1000, #ARGV, 1000 do
    count = redis.call('RPUSH', KEYS[1], unpack(ARGV, next_from, math.min(next_from + 999, #ARGV)))
  end
  redis.call('ZADD', KEYS[4], ARGV[4], ARGV[2])
  redis.call('ZREMRANGEBYRANK', KEYS[4], 0, -33)
  local gen = info[2] or ARGV[2]
  local before = count - (#ARGV - from + 1)
  -- An empty list: what the ledger still names belonged to records that expired.
  if blob_base and before == 0 then release(id_at(1)) end
  local made = created(info[3], KEYS[1], before, ARGV[3])
  redis.call('HSET', KEYS[2], 'v', ARGV[1], 'updated_at', ARGV[3], 'gen', gen, 'count', count,
    'created_at', made)
  if sets then file(sets, ARGV[3], id_at(1)) end
  if #blobs > 0 then
    local counts, data = {}, {}
    for j = first + 1, from - 1, 3 do
      counts[ARGV[j]] = tonumber(ARGV[j + 1])
      data[ARGV[j]] = ARGV[j + 2]
    end
    take_refs(id_at(1), counts, tonumber(ARGV[5]), data)
  end
  refresh(tonumber(ARGV[5]))
  return nil, count, gen, true
end
"""

APPEND = Script.of(
    _APPEND_BATCH
    + """
local refused, count, gen = append(6)
if refused then return refused end
return {0, count, gen}
"""
)

# ARGV: as APPEND's but `after` (see _APPEND_BATCH) before the records.
APPEND_AFTER = Script.of(
    _APPEND_BATCH
    + """
local refused, count, gen = append(7, ARGV[6])
if refused then return refused end
return {0, count, gen}
"""
)

# ARGV: as APPEND's, then cached gen, cached count, tail size (0: none), records... Appends,
# then returns what a read returns: with a tail size, the last that many messages; otherwise
# the messages between the cached count (0 when the gen differs) and this batch, which the
# caller holds already. Start -1: the batch had been applied before (a resend), read apart.
# READ_AFTER_APPEND is that return once the batch is in, here and in the plain script
# (``_plain``): `count` and `gen` after the append, `before` the length before it.
READ_AFTER_APPEND = """
local tail = tonumber(ARGV[8])
if tail > 0 then return {0, count, gen, 0, redis.call('LRANGE', KEYS[1], -tail, -1)} end
local start = 0
if gen == ARGV[6] and tonumber(ARGV[7]) <= before then start = tonumber(ARGV[7]) end
local records = {}
if start < before then records = redis.call('LRANGE', KEYS[1], start, before - 1) end
return {0, count, gen, start, records}
"""
_APPEND_READ = (
    """
local function append_read(first, after)
  local refused, count, gen, applied = append(first, after)
  if refused then return refused end
  if not applied then return {0, count, gen, -1, {}} end
  local before = count - (#ARGV - records_from(first) + 1)
"""
    + READ_AFTER_APPEND
    + "end\n"
)
APPEND_READ = Script.of(_APPEND_BATCH + _APPEND_READ + "return append_read(9)\n")

# ARGV: as APPEND_READ's but `after` (see _APPEND_BATCH) before the records.
APPEND_READ_AFTER = Script.of(_APPEND_BATCH + _APPEND_READ + "return append_read(10, ARGV[9])\n")

# ARGV: version, cached gen, cached count. Only the messages past the cached count when the
# gen still matches (nothing was cleared since); otherwise all of them.
READ = Script.of("""
local info = redis.pcall('HMGET', KEYS[2], 'v', 'gen')
if failed(info) then return refuse(2, info) end
local refused = newer(info[1])
if refused then return refused end
local count = redis.pcall('LLEN', KEYS[1])
if failed(count) then return refuse(1, count) end
local gen = info[2] or ''
local start = 0
if gen ~= '' and gen == ARGV[2] and tonumber(ARGV[3]) <= count then start = tonumber(ARGV[3]) end
return {0, gen, start, redis.call('LRANGE', KEYS[1], start, -1)}
""")

# ARGV: version, n. The last n messages only: what a reader with nothing cached needs.
TAIL = Script.of("""
local stored = redis.pcall('HGET', KEYS[2], 'v')
if failed(stored) then return refuse(2, stored) end
local refused = newer(stored)
if refused then return refused end
local records = redis.pcall('LRANGE', KEYS[1], -tonumber(ARGV[2]), -1)
if failed(records) then return refuse(1, records) end
return {0, records}
""")

# Deletes the session, takes it out of the catalog and releases its blobs.
CLEAR = Script.of(
    """
local refused = unindex(1)
if refused then return refused end
if blob_base then release(id_at(1)) end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
return {0}
""",
    refuse="check_all()",
)

# ARGV: as APPEND's. Deletes the session, then appends the records (at least one) as a new
# session: whole or not at all, like every script.
REPLACE = Script.of(
    """
local refused = unindex(1)
if refused then return refused end
if blob_base then release(id_at(1)) end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
local failed_append, count, gen = append(6)
if failed_append then return failed_append end
return {0, count, gen}
""",
    helpers=_APPEND_BATCH,
    refuse="check_all()",
)

# ARGV: version, key. JSON text is never empty, so '' means "absent".
GET_META = Script.of(
    "return {0, redis.call('HGET', KEYS[3], ARGV[2]) or ''}\n", refuse="check_all()"
)

# Writes the meta `field` ('' as `value` deletes it), then refreshes the ttl (ARGV[2], ms).
# A session holding no records releases what its ledger still names first (see `lapse`).
_PUT_META = """
local function put_meta(field, value)
  if blob_base then lapse(id_at(1)) end
  if value == '' then
    redis.call('HDEL', KEYS[3], field)
  else
    redis.call('HSET', KEYS[2], 'v', ARGV[1])
    redis.call('HSET', KEYS[3], field, value)
  end
  refresh(tonumber(ARGV[2]))
end
"""

# ARGV: version, ttl ms, key, value ('' deletes).
SET_META = Script.of(
    "put_meta(ARGV[3], ARGV[4])\nreturn {0}\n", helpers=_PUT_META, refuse="check_all()"
)

# ARGV: version, ttl ms, key, expected text ('' means absent), value ('' deletes). Sets the
# value only if the stored text is exactly the expected one: {0, 1}; else {0, 0, stored text}.
SWAP_META = Script.of(
    """
local stored = redis.call('HGET', KEYS[3], ARGV[3]) or ''
if stored ~= ARGV[4] then return {0, 0, stored} end
put_meta(ARGV[3], ARGV[5])
return {0, 1}
""",
    helpers=_PUT_META,
    refuse="check_all()",
)
