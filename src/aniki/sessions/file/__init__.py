"""The file store: one JSON-lines file per session in a directory.

- ``session.py``: :class:`FileSession`
- ``store.py``: :class:`FileStore`, a directory of sessions (listing, pruning, deleting)
- ``aio.py``: :class:`AsyncFileSession`, the async twin (calls run on a worker thread)
- ``_file.py``: the session file as one instance holds it: descriptor, lock, header, damage,
  the records read so far
- ``_edits.py``: ``undo`` and an import (``_replace``): a cut, or a new file renamed into
  place; ``_forks.py``: ``fork``
- ``_attachments.py``: attachment bytes kept apart, once per content (``.blobs/``)
- ``_damage.py``: the errors of a damaged file, which is then never written
- ``_meta.py``: derived state beside the file, and ``clear``
- ``_record.py``: the meta file's contents: values, the session's info, a kept count
- ``_info.py``: ``info``/``set_info``, and a session file as a listing reads it
- ``_index.py``: the index by owner and by tag (marker files under ``.index/``)
- ``_timeline.py``: the index by update time (``.index/updated/``), kept by every write
  that moves a file's time, read by a newest-first page of every session
- ``_listing.py``: a store's listing: candidates from the index or the directory, read in
  order under each file's lock
- ``_prune.py``: prune and delete: whole sessions removed, each under its lock, in batches
- ``_pages.py``: a page of the history, through an index of the file's lines
- ``_format.py``: the file format: the header, records, names
- ``_io.py``: locks with a time bound, reading the tail or lines backwards, meta files
- ``_options.py``: the session directory and the options, checked
"""

from .aio import AsyncFileSession
from .session import FileSession
from .store import FileStore

__all__ = ["AsyncFileSession", "FileSession", "FileStore"]
