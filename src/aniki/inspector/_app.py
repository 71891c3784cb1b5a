"""The inspector's web application: read-only pages over one store.

A Starlette application rendered with Jinja templates. It answers GET only, to the host
names ``127.0.0.1`` and ``localhost`` (so another site cannot reach it through DNS
rebinding), sends a content security policy that allows no script at all, and reads the
store on one worker thread so the event loop never waits on it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime, timezone
from importlib import resources
from typing import Any, TypeVar
from urllib.parse import urlencode

import anyio
import anyio.to_thread
from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Route

from .. import __version__
from .._secrets import hide_password
from ..errors import AnikiError
from ..pricing import Prices
from ..sessions._pages import NamedPage, Page
from ._chart import chart
from ._data import StoreReader
from ._headers import SecurityHeaders
from ._views import FILTERS, INLINE_IMAGES, message_view, page_views, report_line, usage_line

__all__ = ["create_app"]

T = TypeVar("T")

PAGE_SIZE = 50
"""Messages on a page unless ``size`` says otherwise."""
MAX_PAGE_SIZE = 500
SESSIONS_PER_PAGE = 100
TURNS_PER_PAGE = 200
SEARCH_HITS = 200


def create_app(url: str, *, prices: Prices | None = None) -> Starlette:
    """The inspector for the store at ``url``, as an ASGI application.

    The store is opened when the application starts (its lifespan) and closed when it
    stops; a store that does not exist is refused then, with a :class:`~aniki.UserError`.
    ``prices`` bill every model call (else each call's own model's, when they are known).
    """
    inspector = _Inspector(url, prices)
    routes = [
        Route("/", inspector.sessions),
        Route("/session", inspector.conversation),
        Route("/call", inspector.call),
        Route("/usage", inspector.usage),
        Route("/search", inspector.search),
        Route("/runs", inspector.runs),
        Route("/export", inspector.export),
        Route("/attachment", inspector.attachment),
        Route("/inspector.css", inspector.stylesheet),
    ]
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(TrustedHostMiddleware, allowed_hosts=["127.0.0.1", "localhost"]),
            Middleware(SecurityHeaders),
        ],
        exception_handlers={HTTPException: inspector.failed, Exception: inspector.failed},
        lifespan=inspector.lifespan,
    )
    return app


class _Inspector:
    def __init__(self, url: str, prices: Prices | None) -> None:
        self.url, self.prices = url, prices
        self.shown_url = hide_password(url)
        self.reader: StoreReader | None = None
        self.limiter = anyio.CapacityLimiter(1)  # one thread uses the store at a time
        self.templates = Environment(
            loader=PackageLoader("aniki.inspector", "templates"),
            autoescape=True,
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.templates.filters.update(FILTERS)
        self.templates.globals.update(
            store=self.shown_url, version=__version__, link=_link, usage_line=usage_line
        )

    @asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        self.reader = await anyio.to_thread.run_sync(
            lambda: StoreReader(self.url, prices=self.prices), limiter=self.limiter
        )
        try:
            yield
        finally:
            reader, self.reader = self.reader, None
            await anyio.to_thread.run_sync(reader.close, limiter=self.limiter)

    async def _read(self, call: Callable[[StoreReader], T]) -> T:
        """``call(reader)`` on the store's worker thread."""
        reader = self.reader
        if reader is None:
            raise HTTPException(503, "the store is not open (the inspector is stopping)")
        return await anyio.to_thread.run_sync(call, reader, limiter=self.limiter)

    async def _page_of(self, session_id: str, start: int, limit: int) -> NamedPage:
        """:meth:`StoreReader.page` on the store's worker thread (attachments named only)."""
        return await self._read(lambda reader: reader.page(session_id, start, limit))

    async def _loaded_of(self, session_id: str, start: int, limit: int) -> Page:
        """:meth:`StoreReader.loaded` (attachment bytes and all) on the store's worker thread."""
        return await self._read(lambda reader: reader.loaded(session_id, start, limit))

    def _page(self, name: str, status: int = 200, **values: Any) -> HTMLResponse:
        html = self.templates.get_template(name).render(**values)
        return HTMLResponse(html, status_code=status)

    async def sessions(self, request: Request) -> Response:
        query = request.query_params.get("q", "").strip()
        start = _number(request, "start", 0)
        infos = await self._read(lambda reader: reader.sessions())
        found = [info for info in infos if query.casefold() in info.id.casefold()]
        shown_infos = found[start : start + SESSIONS_PER_PAGE]
        return self._page(
            "sessions.html",
            title="Sessions",
            query=query,
            total=len(infos),
            found=len(found),
            start=start,
            per_page=SESSIONS_PER_PAGE,
            infos=[(info, _when(info.updated_at)) for info in shown_infos],
        )

    async def conversation(self, request: Request) -> Response:
        session_id = _session_id(request)
        size = min(MAX_PAGE_SIZE, max(1, _number(request, "size", PAGE_SIZE)))
        start = request.query_params.get("start")
        at = request.query_params.get("at")
        if at is not None:  # the page that holds message `at`
            target = _number(request, "at", 0)
            first = target - target % size
        elif start is None:
            first = -size  # the last page
        else:
            first = _number(request, "start", 0)
        page = await self._page_of(session_id, first, size)
        if page.total == 0:
            return self._missing(session_id)
        # A stale link (the history was undone since) or a number typed by hand.
        if at is not None and target >= page.total:
            return self._past_end(session_id, f"message #{target}", page.total, size)
        if not page.messages:
            return self._past_end(session_id, f"messages from #{first} on", page.total, size)
        return self._page(
            "conversation.html",
            title=session_id,
            session_id=session_id,
            page=page,
            size=size,
            views=page_views(page),
            highlight=_number(request, "at", -1),
            pages=_pager(page.start, size, page.total),
        )

    async def call(self, request: Request) -> Response:
        session_id = _session_id(request)
        index = _number(request, "index", 0)
        view = await self._read(lambda reader: reader.call(session_id, index))
        if view is None:
            raise HTTPException(
                404,
                f"message #{index} of this session is not a model's reply with a kept "
                "context report (replies stored before reports were kept have none)",
            )
        size = PAGE_SIZE
        first = max(view.window_start, _number(request, "start", view.window_start))
        limit = max(0, min(size, index - first))
        page = await self._page_of(session_id, first, limit)
        return self._page(
            "call.html",
            title=f"{session_id} #{index}",
            session_id=session_id,
            call=view,
            reply=message_view(index, view.message),
            report=report_line(view.report),
            views=page_views(page),
            pages=_pager(page.start - view.window_start, size, index - view.window_start),
            window_start=view.window_start,
        )

    async def usage(self, request: Request) -> Response:
        session_id = _session_id(request)
        costs = await self._read(lambda reader: reader.costs(session_id))
        if not costs.read:
            return self._missing(session_id)
        start = _number(request, "start", 0)
        shown_turns = costs.turns[start : start + TURNS_PER_PAGE]
        return self._page(
            "usage.html",
            title=f"{session_id}: tokens",
            session_id=session_id,
            costs=costs,
            # None: no call reported cache figures, so the share is unknown, not 0 %.
            share=costs.cached / costs.sent if costs.sent and costs.cache_reported else None,
            chart=chart(costs.turns),
            turns=shown_turns,
            start=start,
            per_page=TURNS_PER_PAGE,
        )

    async def search(self, request: Request) -> Response:
        session_id = _session_id(request)
        query = request.query_params.get("q", "")
        hits: list[Any] = []
        more = False
        if query:
            found, more = await self._read(
                lambda reader: reader.search(session_id, query, SEARCH_HITS)
            )
            hits = [message_view(*hit) for hit in found]
        return self._page(
            "search.html",
            title=f"{session_id}: search",
            session_id=session_id,
            query=query,
            hits=hits,
            more=more,
            limit=SEARCH_HITS,
        )

    async def runs(self, request: Request) -> Response:
        session_id = _session_id(request)
        found = await self._read(lambda reader: reader.runs(session_id))
        when = {info.run_id: _utc(info.updated) for info in found}
        return self._page(
            "runs.html", title=f"{session_id}: runs", session_id=session_id, runs=found, when=when
        )

    async def export(self, request: Request) -> Response:
        session_id = _session_id(request)
        fmt = request.query_params.get("format", "jsonl")
        if fmt not in ("jsonl", "json"):
            raise HTTPException(400, f"unknown export format {fmt!r}: use jsonl or json")
        first = await self._page_of(session_id, 0, 1)
        if first.total == 0:
            return self._missing(session_id)
        name = _file_name(session_id, "session")
        return StreamingResponse(
            self._exported(session_id, fmt),
            media_type="application/x-ndjson" if fmt == "jsonl" else "application/json",
            headers={"content-disposition": f'attachment; filename="{name}.{fmt}"'},
        )

    async def _exported(self, session_id: str, fmt: str) -> AsyncIterator[str]:
        """The export, a page of messages at a time (each read on the store's thread)."""
        from ..cli.sessions_cmd import EXPORT_FORMAT

        if fmt == "json":
            head = {
                "format": EXPORT_FORMAT,
                "id": session_id,
                "exported_at": datetime.now(timezone.utc).isoformat(),
            }
            yield json.dumps(head, ensure_ascii=False)[:-1] + ', "messages": [\n'
        start, count = 0, 0
        while True:
            page = await self._loaded_of(session_id, start, 1000)
            lines = []
            for message in page.messages:
                text = json.dumps(message.to_dict(), ensure_ascii=False)
                if fmt == "json":
                    text = ("  " if count == 0 else ",\n  ") + text
                    count += 1
                else:
                    text += "\n"
                lines.append(text)
            yield "".join(lines)
            start = page.start + len(page.messages)
            if not page.messages or start >= page.total:
                break
        if fmt == "json":
            yield "\n]}\n"

    async def attachment(self, request: Request) -> Response:
        session_id = _session_id(request)
        index, number = _number(request, "index", 0), _number(request, "part", 0)
        page = await self._loaded_of(session_id, index, 1)
        parts = page.messages[0].attachments if page.messages else ()
        if number >= len(parts) or parts[number].data is None:
            raise HTTPException(404, f"message #{index} has no stored attachment {number}")
        part = parts[number]
        if part.media_type in INLINE_IMAGES:
            return Response(part.data, media_type=part.media_type)
        name = _file_name(part.name or "", "attachment")  # a download, never rendered
        return Response(
            part.data,
            media_type="application/octet-stream",
            headers={"content-disposition": f'attachment; filename="{name}"'},
        )

    async def stylesheet(self, request: Request) -> Response:
        css = resources.files("aniki.inspector").joinpath("static/inspector.css").read_text("utf-8")
        return Response(css, media_type="text/css")

    def _past_end(self, session_id: str, asked: str, total: int, size: int) -> Response:
        return self._page(
            "error.html",
            status=404,
            title="Past the end",
            message=f"{asked}: past the end; session {session_id!r} has {total:,} messages "
            f"(#0 to #{total - 1})",
            last_page=_link("/session", id=session_id, size=size if size != PAGE_SIZE else None),
        )

    def _missing(self, session_id: str) -> Response:
        return self._page(
            "error.html",
            status=404,
            title="No such session",
            message=f"session {session_id!r} has no messages in this store",
        )

    async def failed(self, request: Request, exc: Exception) -> Response:
        """An error page: the error's own message for an HTTP or aniki error (store
        messages already hide passwords), the error's type alone for anything else."""
        if isinstance(exc, HTTPException):
            status, message = exc.status_code, str(exc.detail)
        elif isinstance(exc, AnikiError):
            status, message = 502, hide_password(str(exc))
        else:
            status, message = 500, f"the inspector failed: {type(exc).__name__}"
        return self._page("error.html", status=status, title="Error", message=message)


def _session_id(request: Request) -> str:
    session_id = request.query_params.get("id")
    if not session_id:
        raise HTTPException(400, "name a session: ?id=SESSION_ID")
    return session_id


def _number(request: Request, name: str, default: int) -> int:
    value = request.query_params.get(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise HTTPException(400, f"{name} must be a whole number, not {value!r}") from None
    if number < 0 and default >= 0:
        raise HTTPException(400, f"{name} must be 0 or more, not {number}")
    return number


def _file_name(text: str, default: str) -> str:
    """``text`` as a file name a header can carry: ASCII letters, digits, ``-_.`` only."""
    name = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in text)
    return name.strip("._")[:80] or default


def _link(path: str, **params: object) -> str:
    """``path`` with ``params`` as its query (``None`` values left out)."""
    query = urlencode({k: v for k, v in params.items() if v is not None})
    return f"{path}?{query}" if query else path


def _when(value: datetime | None) -> str:
    if value is None:
        return "-"
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _pager(start: int, size: int, total: int) -> dict[str, int | None]:
    """The starts of the first, previous, next and last pages (``None``: no such page)."""
    last = max(0, total - size)
    return {
        "first": 0 if start > 0 else None,
        "previous": max(0, start - size) if start > 0 else None,
        "next": start + size if start + size < total else None,
        "last": last if start + size < total else None,
    }


def _utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="seconds")
