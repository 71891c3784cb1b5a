"""Test helpers for code built on aniki: a scripted model and the session conformance suite.

``MockProvider`` replaces a real model in tests; ``SessionConformance`` checks a session
store (see :mod:`aniki.testing.conformance`).
"""

from __future__ import annotations

from .conformance import SessionConformance
from .mock import MockProvider, MockReply

__all__ = ["MockProvider", "MockReply", "SessionConformance"]
