"""What an app lets a server ask of it (``sampling=``, ``approve_sampling=``, ``elicitation=``,
``roots=``), checked once when the server object is made."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias
from urllib.parse import urlparse

from ..errors import UserError
from ..providers.base import Provider
from ._records import ElicitationReply, ElicitationRequest, SamplingRequest

__all__ = [
    "ApproveSampling",
    "ClientFeatures",
    "ElicitationHandler",
    "Sampling",
    "SamplingHandler",
    "client_features",
]

SamplingHandler: TypeAlias = Callable[[SamplingRequest], str | Awaitable[str]]
"""A function that answers a server's sampling request with the reply text."""

Sampling: TypeAlias = Literal["agent"] | Provider | SamplingHandler
"""Who answers a server's sampling requests: ``"agent"`` (the model of the agent whose run
calls the server's tool), a :class:`~aniki.Provider` (with ``sampling_model=``; without it,
the calling agent's model), or a function."""

ApproveSampling: TypeAlias = Callable[[SamplingRequest], bool | str | Awaitable[bool | str]]
"""Decides each sampling request: ``True`` lets it go ahead; ``False``, or a reason (a
string, sent to the server), refuses it."""

ElicitationHandler: TypeAlias = Callable[
    [ElicitationRequest],
    ElicitationReply | dict[str, Any] | Awaitable[ElicitationReply | dict[str, Any] | None] | None,
]
"""Answers a server's question to the user: an :class:`ElicitationReply`, a dict (accept with
these values) or ``None`` (decline)."""


@dataclass(frozen=True, slots=True)
class ClientFeatures:
    """What a server may ask of the app (see the server classes' parameters)."""

    sampling: Sampling | None = None
    sampling_model: str | None = None
    approve_sampling: ApproveSampling | None = None
    elicitation: ElicitationHandler | None = None
    roots: tuple[tuple[str, str | None], ...] | None = None
    """``(file URI, name)`` pairs."""


def client_features(
    *,
    sampling: Sampling | None,
    sampling_model: str | None,
    approve_sampling: ApproveSampling | None,
    elicitation: ElicitationHandler | None,
    roots: Sequence[str | os.PathLike[str]] | None,
) -> ClientFeatures:
    """The options checked, each refused with what to pass instead."""
    if isinstance(sampling, str) and sampling != "agent":
        raise UserError(f"sampling must be 'agent', a Provider or a function, got {sampling!r}")
    if not (sampling is None or sampling == "agent" or callable(sampling)) and not isinstance(
        sampling, Provider
    ):
        raise UserError(
            "sampling must be 'agent', a Provider, or a function taking a "
            f"SamplingRequest and returning text; got {type(sampling).__name__}"
        )
    if sampling_model is not None and (not isinstance(sampling_model, str) or not sampling_model):
        raise UserError(f"sampling_model must be a model name, got {sampling_model!r}")
    for option, value in (("approve_sampling", approve_sampling), ("elicitation", elicitation)):
        if value is not None and not callable(value):
            raise UserError(f"{option} must be a function, got {type(value).__name__}")
    if approve_sampling is not None and sampling is None:
        raise UserError("approve_sampling= decides sampling requests: pass sampling= too")
    return ClientFeatures(
        sampling=sampling,
        sampling_model=sampling_model,
        approve_sampling=approve_sampling,
        elicitation=elicitation,
        roots=None if roots is None else _roots(roots),
    )


def _roots(roots: Sequence[str | os.PathLike[str]]) -> tuple[tuple[str, str | None], ...]:
    if isinstance(roots, (str, os.PathLike)):
        raise UserError("roots must be a list of paths or file:// URIs, e.g. roots=['.']")
    made: list[tuple[str, str | None]] = []
    for root in roots:
        if isinstance(root, str) and "://" in root:
            if urlparse(root).scheme != "file":
                raise UserError(f"a root must be a path or a file:// URI, got {root!r}")
            made.append((root, None))
        elif isinstance(root, (str, os.PathLike)):
            path = Path(root).expanduser().resolve()
            made.append((path.as_uri(), path.name or None))
        else:
            raise UserError(f"a root must be a path or a file:// URI, got {type(root).__name__}")
    return tuple(made)
