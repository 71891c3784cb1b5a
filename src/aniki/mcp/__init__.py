"""MCP servers as tool sources: ``Agent(mcp_servers=[...])`` offers the model their tools.

Needs the ``mcp`` extra (``pip install 'aniki-sdk[mcp]'``); ``import aniki`` never imports it.

Example::

    from aniki import Agent, Runner
    from aniki.mcp import MCPServerStdio

    server = MCPServerStdio("python", ["my_server.py"])
    agent = Agent("Helper", model="gpt-4o-mini", mcp_servers=[server])
    async with server:
        result = await Runner().run(agent, message="Use the tools.")

The package:

- ``stdio.py``: :class:`MCPServerStdio`, a server run as a subprocess
- ``http.py``: :class:`MCPServerHTTP`, a server at a streamable HTTP endpoint
- ``_base.py``: what both share: connecting on first use, the tool list and its cache, calls
  and what their failures become, closing, use from another event loop
- ``_link.py``: one connection, held by a task of its own; closing what is open at exit
- ``_tools.py``: a server's tools as aniki tools
- ``_results.py``: a tool result as the ``tool`` message (no I/O)
- ``_errors.py``: :class:`MCPServerError`
- ``_sdk.py``: the ``mcp`` import, with the install command when it is missing
"""

from . import _sdk  # noqa: F401  (first: imports mcp, or says how to install it)
from ._errors import MCPServerError
from .http import MCPServerHTTP
from .stdio import MCPServerStdio

__all__ = ["MCPServerError", "MCPServerHTTP", "MCPServerStdio"]
