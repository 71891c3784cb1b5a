"""``fork`` and ``undo`` on the Redis store: the flows both session classes run (no I/O).

A fork is one script over both sessions' eight keys: it reads the source's list (finding the
message ``upto`` names in the script, so an append racing it cannot shift the cut), checks that
the target holds no messages, and writes the copy with the source's meta, or refuses before
writing anything. Records are copied byte for byte, so ids and times stay as they were. The
new session's ``gen`` is the fork's token: a resend of a fork applied before finds it and
succeeds without copying again (rather than finding the target taken).

On a Redis Cluster the two ids hash to two slots (each session's keys share a slot through the
braces around its id), and no script may span two slots. There the fork is two steps within
the call's one deadline: a script reads the source, whole, and a second writes the target,
whole, after the same checks. The copy is still one instant's history of the source, and the
target is still whole or absent.

An undo is one script: it finds the last user message, trims the list before it, and makes
the undo's token the new ``gen``, so every instance's cache starts over (the undoing
instance keeps what it had read before the cut). The token joins the session's batch tokens:
a resend of an undo applied before does not remove another turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from json.encoder import encode_basestring
from typing import Any

from ...errors import StoreUnavailableError, UserError
from ...messages import Message
from .._codec import SCHEMA_VERSION
from .._edits import FORK_SKIPPED_META, forked_count, taken
from . import _edit_scripts as scripts
from ._attachments import decoded
from ._catalog import now_micros
from ._core import RedisCore, new_token
from ._steps import Eval, Flow
from ._steps import text as _text

__all__ = ["fork", "undo"]

_APPLIED = 1
"""A script's status for a resend of a call the server had applied already."""
_NO_SUCH_MESSAGE = -4
_TAKEN = -5


def fork(source: RedisCore, target: RedisCore, upto: str | None, *, split: bool) -> Flow[None]:
    """Copy ``source``'s history through message ``upto`` (all when ``None``) and its meta
    into ``target``; with ``split`` (a Redis Cluster), in two steps."""
    if upto is not None and (not isinstance(upto, str) or not upto):
        raise _no_such_message(upto, source.id)  # not a str, or no message has the id ''
    token = new_token()
    args: tuple[str | int, ...] = (
        SCHEMA_VERSION,
        token,
        str(now_micros()),
        target.ttl_ms,
        upto or "",
        encode_basestring(upto or ""),  # how the record holds the id: a needle to find it by
        *sorted(FORK_SKIPPED_META),
    )
    if not split:
        reply = yield Eval(scripts.FORK, source.keys + target.write_keys, args)
        _check(reply, source, target, upto)
        if int(reply[0]) == 0:
            _seed(source, target, gen=_text(reply[1]), count=int(reply[2]), token=token)
        return
    reply = yield Eval(scripts.FORK_SOURCE, source.keys, args)
    _check(reply, source, target, upto)
    gen, records, meta, labels = _text(reply[1]), reply[2], reply[3], reply[4]
    rest = (*labels, len(meta), *meta, *records)
    reply = yield Eval(scripts.FORK_TARGET, target.write_keys, (*args[:4], *rest))
    _check(reply, source, target, upto)
    if int(reply[0]) == 0:
        _seed(source, target, gen=gen, count=len(records), token=token)


def undo(core: RedisCore) -> Flow[tuple[Message, ...]]:
    """Remove ``core``'s last turn (the last user message on) and return it."""
    token, now = new_token(), now_micros()
    args = (SCHEMA_VERSION, token, now // 1000, core.ttl_ms, str(now))
    reply = yield Eval(scripts.UNDO, core.write_keys, args)
    core.check(reply)
    cache = core.cache
    if int(reply[0]) == _APPLIED:
        cache.reset()
        raise StoreUnavailableError(
            "the connection to Redis broke after undo() had removed the last turn, and the "
            "client sent it again: the turn is removed (once), but the messages it held could "
            "not be returned; read the history to see what remains",
            store=core.store,
        )
    records, before, count, after = reply[1], _text(reply[2]), int(reply[3]), _text(reply[4])
    if not records:
        return ()
    pairs = reply[5]  # the bytes of the blobs the removed records name, released by the undo
    blobs = {_text(key): data for key, data in zip(pairs[::2], pairs[1::2], strict=True)}
    removed = decoded(records, blobs, store=core.store)
    start = count - len(records)
    if cache.generation is not None and cache.generation == before:
        # What this instance read before the cut is still the history's start.
        kept = cache.view()[: min(cache.position, start)]
        cache.reset(after)
        cache.extend(kept, len(kept))
    else:
        cache.reset()
    return tuple(removed)


def _check(reply: Sequence[Any], source: RedisCore, target: RedisCore, upto: str | None) -> None:
    status = int(reply[0])
    if status == _NO_SUCH_MESSAGE:
        raise _no_such_message(upto, source.id)
    if status == _TAKEN:
        raise taken(target.id)
    newer_target = status == -1 and reply[2] == target.keys[1]
    (target if newer_target else source).check(reply)


def _seed(source: RedisCore, target: RedisCore, *, gen: str, count: int, token: str) -> None:
    """Give the new session what the source's instance read of the copied records, if it
    read them under the ``gen`` the fork saw: a list only grows until its gen changes."""
    cache = source.cache
    if gen and cache.generation == gen and cache.position >= count:
        target.cache.reset(token)
        target.cache.extend(cache.view()[:count], count)


def _no_such_message(upto: object, session_id: str) -> UserError:
    """The error :func:`~aniki.sessions._edits.forked_count` gives for ``upto`` (its wording
    kept in one place): it finds no id among no messages."""
    try:
        forked_count((), upto, session_id)  # type: ignore[arg-type]
    except UserError as exc:
        return exc
    raise AssertionError("forked_count found a message among none")
