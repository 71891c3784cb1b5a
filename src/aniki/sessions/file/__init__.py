"""The file store: one JSON-lines file per session in a directory.

- ``session.py``: :class:`FileSession`
- ``store.py``: :class:`FileStore`, a directory of sessions (listing them)
- ``aio.py``: :class:`AsyncFileSession`, the async twin (calls run on a worker thread)
- ``_edits.py``: ``fork``, ``undo`` and an import (``_replace``): a cut, or a new file
  renamed into place
- ``_format.py``: the file format: the header, records, names
- ``_io.py``: locks with a time bound, reading the tail or lines backwards, meta files
"""

from .aio import AsyncFileSession
from .session import FileSession, FileStore

__all__ = ["AsyncFileSession", "FileSession", "FileStore"]
