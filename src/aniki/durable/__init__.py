"""Durable execution on DBOS: a run of an agent becomes a DBOS workflow whose model calls,
tool calls and session writes are steps, so a crashed run resumes without repeating them.

Importing this module imports ``dbos``; ``import aniki`` does not. See docs/durable.md.
"""

from ._agent import APPROVAL_TOPIC, DurableAgent, SessionOpener
from ._steps import DBOSSteps

__all__ = ["APPROVAL_TOPIC", "DBOSSteps", "DurableAgent", "SessionOpener"]
