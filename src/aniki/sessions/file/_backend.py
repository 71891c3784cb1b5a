"""How ``file:`` URLs open (see :mod:`aniki.sessions.url`): through :class:`FileStore`, the
directory of session files (one lock each, nothing held open)."""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import StoreError
from .._backends import Backend
from .._local_backend import LocalBackend
from ..base import SessionInfo
from ..url import file_target
from . import AsyncFileSession, FileStore


class _Files(LocalBackend):
    def list_sessions(
        self, url: str, *, problems: list[StoreError] | None
    ) -> Sequence[SessionInfo]:
        # A file that cannot be listed is left out, and said in `problems`.
        listed: Sequence[SessionInfo] = self.local(url).list_sessions(problems=problems)
        return listed


BACKEND: Backend = _Files(file_target, FileStore, twin=AsyncFileSession._of)
