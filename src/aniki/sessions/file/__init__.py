"""The file store: one JSON-lines file per session in a directory.

- ``session.py``: :class:`FileSession`
- ``store.py``: :class:`FileStore`, a directory of sessions (listing them)
- ``aio.py``: :class:`AsyncFileSession`, the async twin (calls run on a worker thread)
- ``_file.py``: the session file as one instance holds it: descriptor, lock, header, damage,
  the records read so far
- ``_edits.py``: ``fork``, ``undo`` and an import (``_replace``): a cut, or a new file
  renamed into place
- ``_meta.py``: derived state beside the file, and ``clear``
- ``_pages.py``: a page of the history, through an index of the file's lines
- ``_format.py``: the file format: the header, records, names
- ``_io.py``: locks with a time bound, reading the tail or lines backwards, meta files
- ``_options.py``: the session directory and the options, checked
"""

from .aio import AsyncFileSession
from .session import FileSession
from .store import FileStore

__all__ = ["AsyncFileSession", "FileSession", "FileStore"]
