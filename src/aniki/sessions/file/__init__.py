"""The file store: one JSON-lines file per session in a directory.

- ``session.py``: :class:`FileSession` and :class:`FileStore`
- ``aio.py``: :class:`AsyncFileSession`, the async twin (calls run on a worker thread)
- ``_format.py``: the file format: the header, records, names
- ``_io.py``: locks with a time bound, reading the tail, listing a file
"""

from .aio import AsyncFileSession
from .session import FileSession, FileStore

__all__ = ["AsyncFileSession", "FileSession", "FileStore"]
