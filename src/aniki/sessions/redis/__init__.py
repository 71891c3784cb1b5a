"""The Redis store (needs the ``redis`` extra; ``redis`` is imported on first use).

- ``session.py``: :class:`RedisSession` and :class:`AsyncRedisSession`
- ``_core.py``: the state and logic both share: keys, cache, the steps of each operation
- ``_scripts.py``: the Lua scripts that make each write atomic
"""

from .session import AsyncRedisSession, RedisSession

__all__ = ["AsyncRedisSession", "RedisSession"]
