"""The error an MCP server's connection or tool list raises (a failed tool *call* is never
raised: it becomes the ``tool`` message answering the call)."""

from __future__ import annotations

from ..errors import AnikiError

__all__ = ["MCPServerError"]


class MCPServerError(AnikiError, ConnectionError):
    """An MCP server could not be started or reached, did not answer in time, or refused to
    list its tools.

    Raised by ``connect()``, ``list_tools()`` and so by a run that starts with the server's
    tools (``Agent.gather_tools``). Its text never holds a header or environment value.

    Attributes:
        server: the server's name.
    """

    def __init__(self, message: str, *, server: str) -> None:
        super().__init__(message)
        self.server = server
