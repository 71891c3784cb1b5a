"""``aniki inspect``: serve the read-only inspector page for a store on 127.0.0.1."""

from __future__ import annotations

import contextlib
import webbrowser
from typing import TYPE_CHECKING

import click

from ._common import console, default_store_url, handle_errors, shown_url, text

if TYPE_CHECKING:
    from ..pricing import Prices

__all__ = ["inspect_command"]


def _prices(ctx: click.Context, param: click.Parameter, model: str | None) -> Prices | None:
    """``--prices MODEL`` as the model's prices; an unknown model is a usage error."""
    if model is None:
        return None
    from ..errors import UserError
    from ..pricing import ANTHROPIC, OPENAI, prices_for

    try:
        return prices_for(model)
    except UserError:
        known = ", ".join(sorted((*OPENAI.names(), *ANTHROPIC.names())))
        raise click.BadParameter(
            f"no published prices known for {model!r}; name one of {known} "
            "(or a dated release of one, as gpt-4o-mini-2024-07-18)"
        ) from None


@click.command("inspect")
@click.argument("store_url", required=False, metavar="[STORE_URL]")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=None,
    help="The port on 127.0.0.1 to serve on (default 8765; 0 takes any free port).",
)
@click.option("--open", "open_browser", is_flag=True, help="Open the page in a web browser.")
@click.option(
    "--prices",
    metavar="MODEL",
    callback=_prices,
    help="Show each turn's cost at MODEL's published prices (gpt-4o-mini, claude-sonnet-4-5, "
    "...). Without it, each model call is priced by the model it names, when that is known.",
)
@handle_errors
def inspect_command(
    store_url: str | None, port: int | None, open_browser: bool, prices: Prices | None
) -> None:
    """See what a store holds and what each model call was sent, in a web page.

    STORE_URL is the store to read (default: $ANIKI_STORE or the embedded SQLite store).
    The page is served on 127.0.0.1 only and reads the store without changing it. It
    needs the inspect extra: pip install 'aniki-sdk[inspect]'. Prices are those aniki.pricing
    lists (check them against the provider's page: prices change).
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
        serve(url, port=DEFAULT_PORT if port is None else port, ready=ready, prices=prices)
