"""What an MCP server offers besides tools, and what it may ask of the app:
:class:`MCPFeatures`, a part of every server class.

- resources and prompts: ``list_resources()``, ``list_resource_templates()``,
  ``read_resource(uri)``, ``list_prompts()``, ``get_prompt(name, arguments)``, each bounded by
  the server's ``timeout`` and failing with :class:`~aniki.mcp.MCPServerError`;
- the client's side (:mod:`aniki.mcp._callbacks`): sampling, elicitation, roots, and the
  progress and log messages a server sends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from mcp import Client, MCPError, types

from .._run import calling
from .._secrets import Secrets, redact, scrub
from ..errors import UserError
from ._callbacks import Callbacks, InFlight
from ._errors import MCPServerError
from ._features_config import ClientFeatures
from ._records import (
    Prompt,
    PromptResult,
    Resource,
    ResourceContents,
    ResourceTemplate,
    message_of,
    prompt_of,
    resource_contents_of,
    resource_of,
    template_of,
)

__all__ = ["MCPFeatures"]

T = TypeVar("T")

_MOST_PAGES = 100
"""The most pages of a listing a server may send (a cursor that never ends cannot hang)."""


class _NotOffered(Exception):
    """The server does not announce the capability a request needs."""


class MCPFeatures:
    """Resources, prompts, and the requests a server may make of the app (sampling,
    elicitation, roots), for both kinds of server."""

    if TYPE_CHECKING:  # what the server class gives this part
        _name: str
        _secrets: Secrets
        timeout: float

        async def _at_home(self, work: Callable[[], Coroutine[Any, Any, T]]) -> T: ...
        async def _request(self, work: Callable[[Client], Coroutine[Any, Any, T]]) -> T: ...
        def _reason(self, exc: BaseException) -> str: ...

    def _init_features(self, features: ClientFeatures | None) -> None:
        self._features = features if features is not None else ClientFeatures()
        self._in_flight = InFlight()

    def _client_options(self) -> dict[str, Any]:
        """The callbacks (and the log level asked for) of the SDK client of a connection."""
        return Callbacks(
            server=self._name,
            features=self._features,
            in_flight=self._in_flight,
            timeout=self.timeout,
            secrets=self._secrets,
        ).options()

    async def _call_tool(
        self, client: Client, remote_name: str, arguments: dict[str, Any]
    ) -> types.CallToolResult:
        """``tools/call``, its progress reported, and the run it is for (if any) known to the
        requests the server makes meanwhile."""
        run = calling.current()
        key = self._in_flight.add(run) if run is not None else None
        callbacks = Callbacks(
            server=self._name,
            features=self._features,
            in_flight=self._in_flight,
            timeout=self.timeout,
            secrets=self._secrets,
        )
        try:
            return await client.call_tool(
                remote_name, arguments, progress_callback=callbacks.progress(run, remote_name)
            )
        finally:
            if key is not None:
                self._in_flight.remove(key)

    async def list_resources(self) -> Sequence[Resource]:
        """The resources the server lists (every page). Raises
        :class:`~aniki.mcp.MCPServerError` if it offers none, fails, or takes over ``timeout``
        seconds; connects first when not connected."""

        async def pages(client: Client) -> list[Resource]:
            _offers(client, "resources")
            found: list[Resource] = []
            cursor: str | None = None
            for _ in range(_MOST_PAGES):
                page = await client.list_resources(cursor=cursor)
                found.extend(resource_of(item) for item in page.resources)
                if (cursor := page.next_cursor) is None:
                    return found
            raise _TooManyPages

        return await self._ask("list its resources", pages)

    async def list_resource_templates(self) -> Sequence[ResourceTemplate]:
        """The resource templates the server lists (every page); fill one in and pass the URI
        to :meth:`read_resource`. Raises :class:`~aniki.mcp.MCPServerError` as
        :meth:`list_resources` does."""

        async def pages(client: Client) -> list[ResourceTemplate]:
            _offers(client, "resources")
            found: list[ResourceTemplate] = []
            cursor: str | None = None
            for _ in range(_MOST_PAGES):
                page = await client.list_resource_templates(cursor=cursor)
                found.extend(template_of(item) for item in page.resource_templates)
                if (cursor := page.next_cursor) is None:
                    return found
            raise _TooManyPages

        return await self._ask("list its resource templates", pages)

    async def read_resource(self, uri: str) -> Sequence[ResourceContents]:
        """What the resource at ``uri`` holds: one or more parts, each text or bytes. Raises
        :class:`~aniki.mcp.MCPServerError` when the server cannot read it (an unknown URI,
        say) or takes over ``timeout`` seconds."""
        if not isinstance(uri, str) or not uri:
            raise UserError(f"uri must be a non-empty string, got {uri!r}")

        async def read(client: Client) -> list[ResourceContents]:
            _offers(client, "resources")
            result = await client.read_resource(uri)
            return [resource_contents_of(item) for item in result.contents]

        return await self._ask(f"read {uri}", read)

    async def list_prompts(self) -> Sequence[Prompt]:
        """The prompts the server lists (every page). Raises
        :class:`~aniki.mcp.MCPServerError` as :meth:`list_resources` does."""

        async def pages(client: Client) -> list[Prompt]:
            _offers(client, "prompts")
            found: list[Prompt] = []
            cursor: str | None = None
            for _ in range(_MOST_PAGES):
                page = await client.list_prompts(cursor=cursor)
                found.extend(prompt_of(item) for item in page.prompts)
                if (cursor := page.next_cursor) is None:
                    return found
            raise _TooManyPages

        return await self._ask("list its prompts", pages)

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> PromptResult:
        """The prompt ``name`` filled in with ``arguments`` (MCP prompt arguments are
        strings), its messages as aniki :class:`~aniki.Message` objects. Raises
        :class:`~aniki.mcp.MCPServerError` for an unknown prompt, missing arguments, or no
        answer within ``timeout`` seconds."""
        if not isinstance(name, str) or not name:
            raise UserError(f"a prompt's name must be a non-empty string, got {name!r}")
        if arguments is not None and not (
            isinstance(arguments, Mapping)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in arguments.items())
        ):
            raise UserError("arguments must map argument names to strings, e.g. {'city': 'Oslo'}")
        given = dict(arguments) if arguments is not None else None

        async def get(client: Client) -> PromptResult:
            _offers(client, "prompts")
            result = await client.get_prompt(name, given)
            messages = tuple(message_of(item.role, [item.content]) for item in result.messages)
            return PromptResult(messages, result.description)

        return await self._ask(f"give the prompt {name!r}", get)

    async def _ask(self, what: str, work: Callable[[Client], Coroutine[Any, Any, T]]) -> T:
        """``work(client)`` on the server's loop within ``timeout`` seconds; its failures as
        :class:`~aniki.mcp.MCPServerError` saying what ``what`` could not be done."""
        server = self._name
        try:
            return await self._at_home(lambda: self._request(work))
        except asyncio.TimeoutError:
            said = f"did not {what} within {self.timeout:g} s (timeout=)"
            raise MCPServerError(f"MCP server {server!r} {said}", server=server) from None
        except _NotOffered as exc:
            said = f"offers no {exc} (it does not announce the capability)"
            raise MCPServerError(f"MCP server {server!r} {said}", server=server) from None
        except _TooManyPages:
            said = f"sent more than {_MOST_PAGES} pages when asked to {what}"
            raise MCPServerError(f"MCP server {server!r} {said}", server=server) from None
        except (MCPServerError, UserError):
            raise
        except MCPError as exc:
            message = redact(exc.message, self._secrets)
            said = f"could not {what}: {message} (error {exc.code})"
            raise MCPServerError(f"MCP server {server!r} {said}", server=server) from None
        except Exception as exc:
            said = f"could not {what}: {self._reason(exc)}"
            raise MCPServerError(f"MCP server {server!r} {said}", server=server) from scrub(
                exc, self._secrets
            )


class _TooManyPages(Exception):
    """A listing went on for more than :data:`_MOST_PAGES` pages."""


def _offers(client: Client, capability: str) -> None:
    if getattr(client.server_capabilities, capability, None) is None:
        raise _NotOffered(capability)
