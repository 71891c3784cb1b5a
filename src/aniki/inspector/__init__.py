"""``aniki inspect``: a local, read-only web page over a store.

See the sessions of a store, read a conversation a page at a time (roles, tool calls and
results, attachments, reasoning, ids and times), see for every model call what was sent
(the window, the cut, the summary) and what it cost, chart the tokens sent per turn and the
share served from cache, and export a session. It needs the ``inspect`` extra
(``pip install 'aniki-sdk[inspect]'``)::

    aniki inspect sqlite:///chats.db          # then open http://127.0.0.1:8765/

or, from Python, as an ASGI application, or served on a background thread for a while::

    from aniki.inspector import create_app, running
    app = create_app("sqlite:///chats.db")
    with running("sqlite:///chats.db") as address:  # http://127.0.0.1:PORT/
        ...

The page binds to 127.0.0.1 only, answers GET only, runs no script and shows stored text as
text; store URLs are shown with their passwords hidden.
"""

from __future__ import annotations

from ._serve import DEFAULT_PORT, create_app, running, serve

__all__ = ["DEFAULT_PORT", "create_app", "running", "serve"]
