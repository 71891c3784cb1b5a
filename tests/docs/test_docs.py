"""Every ``python`` code block in the docs and the README runs, so the docs cannot rot.

The blocks of one page run in order in one namespace, like a notebook: in a thread with no
running event loop (so ``run_sync`` works), with top-level ``await`` allowed, and with the
working directory set to a fresh temporary directory (files a page creates land there).
"""

from __future__ import annotations

import ast
import asyncio
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from aniki.providers import registry
from aniki.testing import MockProvider
from tests.servers import postgres_dsn, redis_url

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([*ROOT.joinpath("docs").glob("*.md"), ROOT / "README.md"])
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def blocks(page: Path) -> list[tuple[int, str]]:
    text = page.read_text(encoding="utf-8")
    return [(text[: m.start()].count("\n") + 2, m.group(1)) for m in BLOCK.finditer(text)]


def scripted() -> MockProvider:
    """The model the docs' ``provider="openai"`` examples get here: it echoes the user."""
    return MockProvider(handler=lambda request: f"(scripted) {request.messages[-1].content}")


def run_page(page: Path) -> None:
    namespace: dict[str, Any] = {"__name__": f"docs_{page.stem.replace('-', '_')}"}
    loop = asyncio.new_event_loop()
    try:
        for line, source in blocks(page):
            code = compile(
                ast.increment_lineno(ast.parse(source, str(page), "exec"), line - 1),  # type: ignore[arg-type]
                str(page),
                "exec",
                flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
            )
            result = eval(code, namespace)
            if asyncio.iscoroutine(result):
                loop.run_until_complete(result)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_page_code_runs(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not blocks(page):
        pytest.skip(f"{page.name} has no python blocks")
    text = page.read_text(encoding="utf-8")
    if "redis://" in text and "RedisSession(" in text:
        monkeypatch.setenv("ANIKI_DOCS_REDIS_URL", redis_url())
    if "PostgresSession(" in text:
        monkeypatch.setenv("ANIKI_DOCS_POSTGRES_DSN", postgres_dsn())
    monkeypatch.chdir(tmp_path)
    # Pages show real-world code (provider="openai"); offline, a scripted model answers.
    for name in ("openai", "anthropic"):
        monkeypatch.setitem(registry._FACTORIES, name, scripted)
    failure: list[BaseException] = []

    def target() -> None:
        try:
            run_page(page)
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(120)
    assert not thread.is_alive(), f"{page.name} did not finish in 120 s"
    if failure:
        raise failure[0]


def test_every_page_is_linked_from_an_index() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [p.name for p in PAGES if p.parent.name == "docs" and f"docs/{p.name}" not in readme]
    assert missing == []
