"""The Lua helpers with which the Redis scripts keep attachments apart, once per content
(see ``_blobs``): part of every script's prelude (``_scripts``), after ``_index_lua``'s.

A blob is the hash ``<prefix>blob:<sha256>``: ``data`` (the bytes) and ``refs`` (how many
stored records, in every session of the prefix, name it). Each session's info hash counts the
records of that session naming each blob, in a field ``b:<sha256>``, so a clear, a replace, a
prune or a delete releases a session's blobs without reading its records. A blob whose
``refs`` fall to 0 is deleted in the same script.

With a ttl, a blob lives at least as long as the sessions naming it: a write of a session
with a ttl extends the expiry of each blob it names (one with none is left with none), and a
write of a session without one makes them persist.

Blobs are kept only where the catalog is (``blob_base`` is false on a Redis Cluster, where the
client writes attachments inline).
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
local function held(info)
  local fields, counts = redis.call('HGETALL', info), {}
  for j = 1, #fields, 2 do
    if string.sub(fields[j], 1, 2) == 'b:' then
      counts[string.sub(fields[j], 3)] = tonumber(fields[j + 1])
    end
  end
  return counts
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
local function take_refs(base, info, counts, ttl, data)
  for hash, n in pairs(counts) do
    local key = base .. hash
    local made = data and data[hash] and redis.pcall('HSETNX', key, 'data', data[hash]) == 1
    redis.pcall('HINCRBY', key, 'refs', n)
    if info then redis.call('HINCRBY', info, 'b:' .. hash, n) end
    keep_blob(key, ttl, made)
  end
end
local function drop_refs(base, counts, info)
  for hash, n in pairs(counts) do
    local key = base .. hash
    local left = redis.pcall('HINCRBY', key, 'refs', -n)
    if type(left) == 'number' and left <= 0 then redis.call('DEL', key) end
    if info and redis.call('HINCRBY', info, 'b:' .. hash, -n) <= 0 then
      redis.call('HDEL', info, 'b:' .. hash)
    end
  end
end
local function blob_data(base, counts)
  local pairs_found = {}
  for hash in pairs(counts) do
    local data = redis.pcall('HGET', base .. hash, 'data')
    if type(data) == 'string' then
      pairs_found[#pairs_found + 1] = hash
      pairs_found[#pairs_found + 1] = data
    end
  end
  return pairs_found
end
local function refresh(ttl, first)
  first = first or 1
  if ttl > 0 then
    for i = first, first + 3 do redis.call('PEXPIRE', KEYS[i], ttl) end
    if blob_base then
      for hash in pairs(held(KEYS[first + 1])) do keep_blob(blob_base .. hash, ttl, false) end
    end
  end
end
"""
"""Defines ``blob_base`` (``<prefix>blob:``, or false); ``named(records, from, to)`` (blob
hash -> how many of the records name it), ``held(info)`` (the same, from a session's info
hash), ``keep_blob(key, ttl, made)`` (the expiry a write gives a blob), ``take_refs(base,
info, counts, ttl, data)`` (count references; with ``data``, hash -> bytes, store a blob not
yet stored), ``drop_refs(base, counts, info)`` (release references; a blob at 0 is deleted),
``blob_data(base, counts)`` (the blobs' bytes, as hash, bytes pairs) and ``refresh(ttl,
first)`` (a write's expiry for the session at ``KEYS[first..first+3]`` and its blobs)."""
