"""Test helpers for code built on aniki: a scripted model and the session conformance suite.

``MockProvider`` replaces a real model in tests. The conformance suite
(``aniki.testing.conformance.SessionConformance``) checks a session store; it imports pytest,
so it is not imported here.
"""

from __future__ import annotations

from .mock import MockProvider, MockReply

__all__ = ["MockProvider", "MockReply"]
