"""Where conversation history lives: the session protocols, the stores, and history policies."""

from __future__ import annotations

from .base import AsyncSession, Session, SessionInfo
from .memory import InMemorySession

__all__ = [
    "AsyncSession",
    "InMemorySession",
    "Session",
    "SessionInfo",
]
