"""The Redis store (needs the ``redis`` extra; ``redis`` is imported on first use).

- ``session.py``: :class:`RedisSession`; ``aio.py``: :class:`AsyncRedisSession`; ``_base.py``:
  their constructor (the methods both share are ``sessions/_flow_store.py``'s)
- ``_core.py``: the state and logic both share: keys, cache, the steps of each operation
- ``_edits.py``: the steps of ``fork`` and ``undo``
- ``_scripts.py``, ``_edit_scripts.py``: the Lua scripts that make each write atomic
- ``_client.py``: the redis-py client: built from a URL with bounded waits, or passed in
"""

from .session import AsyncRedisSession, RedisSession

__all__ = ["AsyncRedisSession", "RedisSession"]
