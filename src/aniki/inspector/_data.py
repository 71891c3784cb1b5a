"""What the inspector reads from a store: sessions, pages of messages, model calls, costs.

Everything here only reads. All store access goes through one :class:`StoreReader`, whose
methods run on one worker thread (see :mod:`aniki.inspector._app`), so a store object is
never used by two threads at once.

Pages that are shown name their attachments without loading their bytes
(:func:`~aniki.sessions._pages.read_named_page`); only an export and an attachment's own
download read the bytes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .._run.journal import KEY, RunInfo, runs_in
from .._secrets import hide_password
from ..errors import UserError
from ..messages import Message
from ..pricing import Prices, prices_for
from ..reports import ContextReport
from ..sessions._blobs import AttachmentRef
from ..sessions._capabilities import capabilities_of
from ..sessions._pages import NamedPage, Page, read_named_page, read_page
from ..sessions.base import SessionInfo
from ..usage import Usage

__all__ = [
    "CallView",
    "Costs",
    "StoreReader",
    "TurnCost",
]

_SCAN_PAGE = 2000
"""Messages read at a time when a whole session is scanned (costs, search, export)."""

P = TypeVar("P", bound=Page)

Hit = tuple[int, Message, tuple[AttachmentRef, ...]]
"""A message found by a search: its index, the message, what names its attachments."""


@dataclass(slots=True)
class TurnCost:
    """What one turn (a user message and the model calls answering it) was billed."""

    turn: int
    """The turn's number, from 1."""
    index: int
    """The index of the turn's first message in the history."""
    calls: int = 0
    """Model calls made in the turn."""
    sent: int = 0
    """Input tokens: as the provider billed them, else the estimate of the call's report."""
    cached: int = 0
    """Of :attr:`sent`, the tokens the provider served from its prompt cache."""
    estimated: int = 0
    """Calls whose provider reported no usage (their :attr:`sent` share is an estimate)."""
    cache_reported: bool = False
    """Whether a call of the turn reported prompt-cache tokens (read or written). A provider
    that never does (llama.cpp's server, say) leaves :attr:`cached` at 0 without meaning it."""
    cost: float | None = None
    """Dollars billed for the calls that reported usage and could be priced (see
    :attr:`priced`); ``None`` when none could: never a figure made up from an estimate."""
    priced: int = 0
    """Calls counted in :attr:`cost`."""


@dataclass(slots=True)
class Costs:
    """A session's model calls, turn by turn, as far as it has been read."""

    turns: list[TurnCost] = field(default_factory=list)
    read: int = 0
    """How many messages were read into :attr:`turns`."""
    last_id: str | None = None
    """The id of the last message read, to notice a history that was edited since."""
    prices: Prices | None = None
    """The prices every call is billed at; ``None``: each at its own model's, when
    :func:`~aniki.pricing.prices_for` knows it."""
    _known: dict[str, Prices | None] = field(default_factory=dict, repr=False)
    """Each model name met so far and its prices (``None``: unknown)."""

    @property
    def sent(self) -> int:
        """Input tokens over the whole conversation."""
        return sum(turn.sent for turn in self.turns)

    @property
    def cached(self) -> int:
        """Cached input tokens over the whole conversation."""
        return sum(turn.cached for turn in self.turns)

    @property
    def cache_reported(self) -> bool:
        """Whether any call reported prompt-cache figures: only then is :attr:`cached` known."""
        return any(turn.cache_reported for turn in self.turns)

    @property
    def calls(self) -> int:
        """Model calls over the whole conversation."""
        return sum(turn.calls for turn in self.turns)

    @property
    def cost(self) -> float | None:
        """Dollars over the whole conversation, for the calls that could be priced;
        ``None`` when none could."""
        costs = [turn.cost for turn in self.turns if turn.cost is not None]
        return sum(costs) if costs else None

    @property
    def priced(self) -> int:
        """Calls counted in :attr:`cost`."""
        return sum(turn.priced for turn in self.turns)

    def add(self, index: int, message: Message) -> None:
        """Count ``message``, the history's message at ``index``."""
        if message.role == "user" or not self.turns:
            self.turns.append(TurnCost(len(self.turns) + 1, index))
        if message.role != "assistant":
            return
        usage, report = message.usage, message.context
        if usage is None and report is None:
            return  # not written by a model call this process saw (an import, say)
        turn = self.turns[-1]
        turn.calls += 1
        if usage is not None and usage.input_tokens:
            turn.sent += usage.input_tokens
            turn.cached += usage.cache_read_tokens
            if usage.cache_read_tokens or usage.cache_write_tokens:
                turn.cache_reported = True
            self._price(turn, message.model, usage)
        elif report is not None:
            turn.sent += report.tokens.total
            turn.estimated += 1
        else:
            turn.estimated += 1

    def _price(self, turn: TurnCost, model: str | None, usage: Usage) -> None:
        """Add what ``usage`` cost to ``turn``, when its prices are known."""
        prices = self.prices
        if prices is None and model is not None:
            if model not in self._known:
                try:
                    self._known[model] = prices_for(model)
                except UserError:
                    self._known[model] = None
            prices = self._known[model]
        if prices is None:
            return
        try:
            cost = prices.cost(usage)
        except UserError:  # counts no provider sends (more cached than sent): not priced
            return
        turn.cost = (turn.cost or 0.0) + cost
        turn.priced += 1


@dataclass(frozen=True, slots=True)
class CallView:
    """One model call: the assistant message it produced and what the request held."""

    index: int
    """The index of the assistant message the call produced."""
    message: Message
    report: ContextReport
    window_start: int
    """The index of the first stored message sent verbatim."""
    summarized: int
    """How many of the oldest messages a summary stood for (``history[:summarized]``)."""
    summary: str | None
    """The summary's text, when the stored summary is the one this call was sent."""
    summary_replaced: bool
    """Whether a summary was sent but the store now holds a later one."""

    @property
    def left_out(self) -> int:
        """Messages neither sent nor summarized: those before the window's cut."""
        return max(0, self.window_start - self.summarized)


class StoreReader:
    """Read-only access to the store at one URL."""

    def __init__(self, url: str, *, prices: Prices | None = None) -> None:
        """Open the store at ``url``; ``prices``, when given, bill every model call."""
        from ..cli._stores import absent, check_store_url
        from ..sessions.store import open_store

        self.url = check_store_url(url)
        if absent(self.url):
            raise UserError(
                f"there is no store at {hide_password(self.url)}: check the path "
                "(an absolute path needs four slashes, as in sqlite:////var/chats.db)"
            )
        _refuse_empty(self.url)
        self._store: Any = open_store(self.url)
        self._costs: dict[str, Costs] = {}
        self._prices = prices

    def close(self) -> None:
        """Close the store's connections."""
        self._store.close()

    def sessions(self) -> list[SessionInfo]:
        """Every session of the store, by id."""
        infos: list[SessionInfo] = self._store.list_sessions()
        return sorted(infos, key=lambda info: info.id)

    def page(self, session_id: str, start: int, limit: int) -> NamedPage:
        """Messages ``start`` to ``start + limit`` of a session (``start < 0``: from the end),
        their attachments named, not loaded."""
        return read_named_page(self._session(session_id), start, limit)

    def loaded(self, session_id: str, start: int, limit: int) -> Page:
        """:meth:`page` with the attachments' bytes (for an export or a download)."""
        return read_page(self._session(session_id), start, limit)

    def call(self, session_id: str, index: int) -> CallView | None:
        """The model call whose reply is message ``index``; ``None`` when that message is not
        an assistant message with a kept report."""
        page = self.page(session_id, index, 1)
        if not page.messages:
            return None
        message = page.messages[0]
        report = message.context
        if message.role != "assistant" or report is None:
            return None
        start = max(0, index - report.sent_messages)
        summary_text: str | None = None
        replaced = False
        if report.summarized_messages:
            stored = self._summary(session_id)
            if stored is not None and stored[1] == report.summarized_messages:
                summary_text = stored[0]
            else:
                replaced = True
        return CallView(
            index, message, report, start, report.summarized_messages, summary_text, replaced
        )

    def costs(self, session_id: str) -> Costs:
        """The session's turns and what each was billed; reads only what was appended since
        the last call (the whole history again when it was edited)."""
        costs = self._costs.get(session_id)
        session = self._session(session_id)
        if costs is not None and costs.read:
            check = read_named_page(session, costs.read - 1, 1)
            if check.total < costs.read or check.messages[0].id != costs.last_id:
                costs = None  # cleared, undone or replaced since
        if costs is None:
            costs = Costs(prices=self._prices)
        for page in _scan(session, costs.read, read_named_page):
            for index, message in enumerate(page.messages, start=page.start):
                costs.add(index, message)
                costs.read, costs.last_id = index + 1, message.id
        if len(self._costs) > 64:
            self._costs.clear()
        self._costs[session_id] = costs
        return costs

    def search(self, session_id: str, text: str, limit: int) -> tuple[list[Hit], bool]:
        """The first ``limit`` messages whose text, tool calls or tool results hold ``text``
        (any case), with their indexes, and whether there were more."""
        needle = text.casefold()
        found: list[Hit] = []
        for page in _scan(self._session(session_id), 0, read_named_page):
            for offset, message in enumerate(page.messages):
                haystack = message.content + "".join(
                    call.name + call.arguments for call in message.tool_calls
                )
                if needle in haystack.casefold():
                    if len(found) == limit:
                        return found, True
                    found.append((page.start + offset, message, page.attachments[offset]))
        return found, False

    def export(self, session_id: str) -> Iterator[Message]:
        """Every message of a session, attachments and all, a page at a time."""
        for page in _scan(self._session(session_id), 0, read_page):
            yield from page.messages

    def runs(self, session_id: str) -> list[RunInfo]:
        """The runs the session's run journal remembers, the newest first."""
        get_meta = capabilities_of(self._session(session_id)).get_meta
        return [] if get_meta is None else runs_in(get_meta(KEY), session_id)

    def _summary(self, session_id: str) -> tuple[str, int] | None:
        """The stored summary's text and how many messages it covers."""
        from ..sessions.policies._summary import SUMMARY_KEY, Summary

        get_meta = capabilities_of(self._session(session_id)).get_meta
        if get_meta is None:
            return None
        summary = Summary.from_record(get_meta(SUMMARY_KEY))
        return None if summary is None else (summary.text, summary.covered)

    def _session(self, session_id: str) -> Any:
        return self._store.session(session_id)


def _scan(session: Any, start: int, read: Callable[[Any, int, int], P]) -> Iterator[P]:
    """The history from ``start`` on, a page (as ``read`` reads it) at a time."""
    while True:
        page = read(session, start, _SCAN_PAGE)
        yield page
        start = page.start + len(page.messages)
        if not page.messages or start >= page.total:
            return


def _refuse_empty(url: str) -> None:
    """A :class:`UserError` for a SQLite file or a PostgreSQL database without aniki's
    tables: opening it as a store would create them, and the inspector only reads."""
    from ..cli._stores import sqlite_path

    path = sqlite_path(url)
    if path is not None:
        import sqlite3

        try:
            with contextlib.closing(
                sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5)
            ) as conn:
                found = conn.execute(_SQLITE_TABLE).fetchone()
        except sqlite3.Error:
            return  # not a database: opening it says what is wrong, writing nothing
        if found is None:
            raise UserError(
                f"{path} holds no aniki sessions (it has no aniki tables); the inspector "
                "only reads, so it does not create them"
            )
    elif url.partition(":")[0].lower() in ("postgresql", "postgres"):
        try:
            import psycopg

            from ..sessions.postgres._base import DEFAULT_TABLE

            with psycopg.connect(url, connect_timeout=5) as conn:
                row = conn.execute("SELECT to_regclass(%s)", (DEFAULT_TABLE,)).fetchone()
        except Exception:  # opening the store reports it, with the password hidden
            return
        if row is None or row[0] is None:
            raise UserError(
                f"the database at {hide_password(url)} holds no aniki sessions (it has no "
                f"{DEFAULT_TABLE} table); the inspector only reads, so it does not create it"
            )


_SQLITE_TABLE = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'aniki_messages'"
