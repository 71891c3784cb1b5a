"""The Redis store (needs the ``redis`` extra; ``redis`` is imported on first use).

- ``session.py``: :class:`RedisSession`; ``aio.py``: :class:`AsyncRedisSession`; ``_base.py``:
  their constructor (the methods both share are ``sessions/_flow_store.py``'s)
- ``_core.py``: the state and logic both share: keys, cache, the steps of each operation
  (``_steps.py``: the steps themselves, and what a script's refusal means)
- ``_catalog.py``: a session's info and the store's listing, prune and delete, by sorted sets
- ``_attachments.py``: attachments kept apart, once per content: what an append sends, what a
  read fetches
- ``_edits.py``: the steps of ``fork`` and ``undo``
- ``_scripts.py``, ``_edit_scripts.py``, ``_catalog_scripts.py``: the Lua scripts that make
  each operation atomic, over the helpers of ``_index_lua.py`` (the catalog kept in step) and
  ``_blob_lua.py`` (blobs and their reference counts)
- ``_client.py``: the redis-py client: built from a URL with bounded waits, or passed in
"""

from .session import AsyncRedisSession, RedisSession

__all__ = ["AsyncRedisSession", "RedisSession"]
