"""The Lua helpers with which the Redis scripts keep attachments apart, once per content
(see ``_blobs``): part of every script's prelude (``_scripts``), after ``_index_lua``'s.

A blob is the hash ``<prefix>blob:<sha256>``: ``data`` (the bytes) and, for each session
whose records name it, a field ``r:<id>`` (how many of that session's records do). Each
session keeps the set ``<prefix>{<id>}:blobs`` of the hashes it names (its *ledger*), so a
clear, a replace, a prune or a delete releases a session's blobs without reading its records.
A blob left with no ``r:`` field is deleted in the same script.

With a ttl, a blob lives at least as long as the sessions naming it: a write of a session
with a ttl extends the expiry of each blob it names (one with none is left with none), and a
write of a session without one makes them persist. The ledger never expires: it outlives a
session that expired, so that what the session named can still be released. The ledger names
what the session's records name, so while the session holds no records it should name
nothing: what it still names then belonged to records that expired. The next write of that id
releases it before taking references of its own (``lapse``, or the append's own check), and
so does a sweep of expired sessions (``_catalog_scripts``). Because a session only ever
removes its own ``r:<id>`` field, releasing late is safe whatever happened to the blob
meanwhile: a blob that expired and was stored again by another session holds no field of
this one.

Blobs are kept only where the catalog is (``blob_base`` is false on a Redis Cluster, where the
client writes attachments inline); the catalog's scripts set ``blob_base`` from their prefix.
"""

from __future__ import annotations

__all__ = ["BLOB_HELPERS"]

BLOB_HELPERS = r"""
local blob_base = catalog and (string.sub(catalog, 1, -9) .. 'blob:')
local function named(records, from, to)
  local counts = {}
  for j = from or 1, to or #records do
    local record = records[j]
    if string.find(record, '"blob":"', 1, true) then
      local seen = {}
      for hash in string.gmatch(record, '"blob":"(%x+)"') do
        if not seen[hash] then
          seen[hash] = true
          counts[hash] = (counts[hash] or 0) + 1
        end
      end
    end
  end
  return counts
end
local function session_key(id, suffix)
  return string.sub(blob_base, 1, -6) .. '{' .. id .. '}:' .. suffix
end
local function held(id)
  local hashes = redis.pcall('SMEMBERS', session_key(id, 'blobs'))
  if failed(hashes) then return {} end
  return hashes
end
local function keep_blob(key, ttl, made)
  if ttl <= 0 then
    redis.pcall('PERSIST', key)
    return
  end
  local left = redis.pcall('PTTL', key)
  if type(left) ~= 'number' then return end
  if (made or left >= 0) and left < ttl then redis.pcall('PEXPIRE', key, ttl) end
end
local function drop_if_unnamed(key)
  -- Only its bytes left (or nothing at all): no session names the blob any more.
  if redis.pcall('HLEN', key) == redis.pcall('HEXISTS', key, 'data') then
    redis.call('DEL', key)
  end
end
local function take_refs(id, counts, ttl, data)
  local field, ledger = 'r:' .. id, session_key(id, 'blobs')
  for hash, n in pairs(counts) do
    local key = blob_base .. hash
    local made = data and data[hash] and redis.pcall('HSETNX', key, 'data', data[hash]) == 1
    redis.pcall('HINCRBY', key, field, n)
    redis.call('SADD', ledger, hash)
    keep_blob(key, ttl, made)
  end
end
local function drop_refs(id, counts)
  local field, ledger = 'r:' .. id, session_key(id, 'blobs')
  for hash, n in pairs(counts) do
    local key = blob_base .. hash
    local left = redis.pcall('HINCRBY', key, field, -n)
    if type(left) ~= 'number' or left <= 0 then
      redis.pcall('HDEL', key, field)
      redis.call('SREM', ledger, hash)
      drop_if_unnamed(key)
    end
  end
end
local function release(id)
  local ledger = session_key(id, 'blobs')
  local hashes = redis.pcall('SMEMBERS', ledger)
  if failed(hashes) then return end
  for _, hash in ipairs(hashes) do
    local key = blob_base .. hash
    redis.pcall('HDEL', key, 'r:' .. id)
    drop_if_unnamed(key)
  end
  redis.call('DEL', ledger)
end
local function lapse(id)
  if redis.call('EXISTS', session_key(id, 'msgs')) == 0 then release(id) end
end
local function blob_data(counts)
  local pairs_found = {}
  for hash in pairs(counts) do
    local data = redis.pcall('HGET', blob_base .. hash, 'data')
    if type(data) == 'string' then
      pairs_found[#pairs_found + 1] = hash
      pairs_found[#pairs_found + 1] = data
    end
  end
  return pairs_found
end
local function refresh(ttl, first)
  first = first or 1
  if ttl <= 0 then return end
  -- The clock is read before the expiry is set, so the due time filed is not after it.
  local due = catalog and server_ms() + ttl
  local written = redis.call('PEXPIRE', KEYS[first + 1], ttl) == 1
  for _, i in ipairs({first, first + 2, first + 3}) do redis.call('PEXPIRE', KEYS[i], ttl) end
  if due and written then file_expiry(id_at(first), due) end
  if blob_base then
    for _, hash in ipairs(held(id_at(first))) do keep_blob(blob_base .. hash, ttl, false) end
  end
end
"""
"""Defines ``blob_base`` (``<prefix>blob:``, or false); ``named(records, from, to)`` (blob
hash -> how many of the records name it), ``session_key(id, suffix)`` (the key
``<prefix>{<id>}:<suffix>``), ``held(id)`` (the hashes in a session's ledger),
``keep_blob(key, ttl, made)`` (the expiry a write gives a blob), ``drop_if_unnamed(key)``,
``take_refs(id, counts, ttl, data)`` (count references; with ``data``, hash -> bytes, store a
blob not yet stored), ``drop_refs(id, counts)`` (release that many references), ``release(id)``
(release every reference of the session and its ledger), ``lapse(id)`` (``release``, when
the session holds no records), ``blob_data(counts)`` (the blobs' bytes, as hash, bytes
pairs) and ``refresh(ttl, first)`` (a write's expiry for the session at
``KEYS[first..first+3]``, its place in the catalog's ``expiry`` set and its blobs)."""
