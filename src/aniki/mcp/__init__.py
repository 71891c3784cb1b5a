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
- ``_features.py``: resources, prompts, and what a server may ask of the app
- ``_callbacks.py``: the client's answers to sampling, elicitation and roots requests; progress
  and log messages on the ``aniki.mcp`` logger and in a run's stream
- ``_features_config.py``: the ``sampling=``, ``elicitation=``, ``roots=`` options, checked
- ``_records.py``: resources, prompts and requests as aniki's dataclasses (no I/O)
- ``_tools.py``: a server's tools as aniki tools
- ``_results.py``: a tool result as the ``tool`` message (no I/O)
- ``_clip.py``: a server's messages cut to ``max_result_bytes`` while they are read
- ``_transports.py``: the HTTP transport that cuts results and notices a lost session
- ``_watchdog.py``: the process between aniki and a stdio server, ending it with aniki
- ``_errors.py``: :class:`MCPServerError`
- ``_sdk.py``: the ``mcp`` import, with the install command when it is missing
"""

from . import _sdk  # noqa: F401  (first: imports mcp, or says how to install it)
from ._errors import MCPServerError
from ._records import (
    ElicitationReply,
    ElicitationRequest,
    Prompt,
    PromptArgument,
    PromptResult,
    Resource,
    ResourceContents,
    ResourceTemplate,
    SamplingRequest,
)
from .http import MCPServerHTTP
from .stdio import MCPServerStdio

__all__ = [
    "ElicitationReply",
    "ElicitationRequest",
    "MCPServerError",
    "MCPServerHTTP",
    "MCPServerStdio",
    "Prompt",
    "PromptArgument",
    "PromptResult",
    "Resource",
    "ResourceContents",
    "ResourceTemplate",
    "SamplingRequest",
]
