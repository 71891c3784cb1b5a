"""The frameworks under benchmark, each behind the interface in :mod:`peers.base`."""

from __future__ import annotations

from .aniki_peer import AnikiPeer
from .base import (
    INSTRUCTIONS,
    REPLY,
    USER_MESSAGE,
    Answer,
    Backend,
    Chat,
    Peer,
    Reader,
    StoreSpec,
    Trimming,
    Unsupported,
)
from .openai_agents_peer import OpenAIAgentsPeer
from .pydantic_ai_peer import PydanticAIPeer

__all__ = [
    "ALL_PEERS",
    "INSTRUCTIONS",
    "REPLY",
    "USER_MESSAGE",
    "Answer",
    "Backend",
    "Chat",
    "Peer",
    "Reader",
    "StoreSpec",
    "Trimming",
    "Unsupported",
    "available_peers",
]

ALL_PEERS: tuple[Peer, ...] = (AnikiPeer(), OpenAIAgentsPeer(), PydanticAIPeer())
"""aniki first: every ratio in the table is aniki's figure over a peer's."""


def available_peers(names: tuple[str, ...] | None = None) -> list[Peer]:
    """The installed frameworks (restricted to ``names`` when given), aniki first."""
    return [p for p in ALL_PEERS if p.available() and (names is None or p.name in names)]
