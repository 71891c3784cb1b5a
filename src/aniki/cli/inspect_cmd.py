"""``aniki inspect``: serve the read-only inspector page for a store on 127.0.0.1."""

from __future__ import annotations

import contextlib
import webbrowser

import click

from ._common import console, default_store_url, handle_errors, shown_url, text

__all__ = ["inspect_command"]


@click.command("inspect")
@click.argument("store_url", required=False, metavar="[STORE_URL]")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=None,
    help="The port on 127.0.0.1 to serve on (default 8765; 0 takes any free port).",
)
@click.option("--open", "open_browser", is_flag=True, help="Open the page in a web browser.")
@handle_errors
def inspect_command(store_url: str | None, port: int | None, open_browser: bool) -> None:
    """See what a store holds and what each model call was sent, in a web page.

    STORE_URL is the store to read (default: $ANIKI_STORE or the embedded SQLite store).
    The page is served on 127.0.0.1 only and reads the store without changing it. It
    needs the inspect extra: pip install 'aniki-sdk[inspect]'.
    """
    from ..inspector import DEFAULT_PORT, serve

    url = store_url or default_store_url()

    def ready(address: str) -> None:
        console.print(
            f"inspecting {shown_url(url)} at {text(address)} (Ctrl-C to stop)", soft_wrap=True
        )
        if open_browser:
            webbrowser.open(address)

    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: uvicorn has shut down cleanly
        serve(url, port=DEFAULT_PORT if port is None else port, ready=ready)
