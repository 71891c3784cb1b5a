"""Every ``python`` block in the docs and the README runs as the page says, so the docs cannot rot.

The rule for a page (docs/first-agent.md tells readers the same):

- **A page is a script.** Its blocks, in order, make one file that runs with ``python page.py``:
  valid Python with no top-level ``await``. Async calls run under ``asyncio.run(...)`` (one
  call, or an ``async def main()`` holding several), so ``run_sync`` works between them. A
  later block may use names an earlier one made, as in any script.
- **A page may declare itself a notebook** with ``<!-- runs as: notebook -->`` as its first
  line. Its blocks are cells, run in order on one running event loop with top-level ``await``;
  ``run_sync``, which refuses to run inside a running loop, fails there.

Each page runs that way in a fresh temporary directory (files a page makes land there), in a
thread of its own with no event loop. A script page is written to ``docs_<page>.py``, each line
of code at its line on the page (so a traceback's line numbers are the page's), and run as
``__main__`` with ``runpy``, with its directory first on ``sys.path`` as ``python`` puts it. It
runs in this process rather than a subprocess so that the registry override below holds: the
pages' ``provider="openai"`` gets a scripted model.
"""

from __future__ import annotations

import ast
import asyncio
import re
import runpy
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aniki import UserError
from aniki.providers import registry
from aniki.testing import MockProvider
from tests.servers import postgres_dsn, redis_url

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([*ROOT.joinpath("docs").glob("*.md"), ROOT / "README.md"])
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
NOTEBOOK = "<!-- runs as: notebook -->"


def blocks(page: Path) -> list[tuple[int, str]]:
    """Each python block of the page, with the page's line number of its first line."""
    text = page.read_text(encoding="utf-8")
    return [(text[: m.start()].count("\n") + 2, m.group(1)) for m in BLOCK.finditer(text)]


def is_notebook(page: Path) -> bool:
    return page.read_text(encoding="utf-8").startswith(NOTEBOOK)


def script_of(page: Path) -> str:
    """The page's blocks as one script, each line of code at its line on the page."""
    lines = [""] * page.read_text(encoding="utf-8").count("\n")
    for first, source in blocks(page):
        for offset, code in enumerate(source.splitlines()):
            lines[first - 1 + offset] = code
    return "\n".join(lines) + "\n"


def breaks_the_rule(page: Path) -> str | None:
    """Why the page cannot run as a script, or None when it can (or is a notebook)."""
    if is_notebook(page):
        return None
    try:
        compile(script_of(page), str(page), "exec")
    except SyntaxError as error:
        return f"line {error.lineno}: {error.msg}"
    return None


def run_script(page: Path, directory: Path) -> None:
    path = directory / f"docs_{page.stem.replace('-', '_')}.py"  # never mcp.py: it would shadow mcp
    path.write_text(script_of(page), encoding="utf-8")
    runpy.run_path(str(path), run_name="__main__")


async def run_cells(page: Path) -> None:
    namespace: dict[str, Any] = {"__name__": "__main__"}
    for first, source in blocks(page):
        tree = ast.increment_lineno(ast.parse(source, str(page)), first - 1)
        code = compile(tree, str(page), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        result = eval(code, namespace)
        if asyncio.iscoroutine(result):
            await result


def run_page(page: Path, directory: Path) -> None:
    """Run the page as it says it runs: a script, or a notebook's cells on one running loop."""
    if is_notebook(page):
        in_thread(lambda: asyncio.run(run_cells(page)), page)
    else:
        in_thread(lambda: run_script(page, directory), page)


def in_thread(work: Callable[[], None], page: Path) -> None:
    """Run the work in a thread with no event loop, as a script's main thread has none."""
    failure: list[BaseException] = []

    def target() -> None:
        try:
            work()
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=target, name=f"docs {page.name}")
    thread.start()
    thread.join(120)
    assert not thread.is_alive(), f"{page.name} did not finish in 120 s"
    if failure:
        raise failure[0]


def scripted() -> MockProvider:
    """The model the docs' ``provider="openai"`` examples get here: it echoes the user."""
    return MockProvider(handler=lambda request: f"(scripted) {request.messages[-1].content}")


@pytest.fixture
def page_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh working directory, first on sys.path, with the pages' real providers scripted."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    # Pages show real-world code (provider="openai"); offline, a scripted model answers.
    for name in ("openai", "anthropic"):
        monkeypatch.setitem(registry._FACTORIES, name, scripted)
    return tmp_path


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_page_code_runs(page: Path, page_dir: Path) -> None:
    if not blocks(page):
        pytest.skip(f"{page.name} has no python blocks")
    text = page.read_text(encoding="utf-8")
    if "redis://" in text and "RedisSession(" in text:
        redis_url()  # skips (fails under CI) when the server is down
    if "PostgresSession(" in text:
        postgres_dsn()
    run_page(page, page_dir)


AWAIT_IN_A_SCRIPT = """\
# A page

```python
from aniki import Agent, Runner
from aniki.testing import MockProvider

agent = Agent("Echo", model="m", provider=MockProvider(handler=lambda request: "hi"))
Runner().run_sync(agent, message="Hello")
```

```python
await Runner().run(agent, message="Hello again")
```
"""

RUN_SYNC_IN_A_NOTEBOOK = f"{NOTEBOOK}\n" + AWAIT_IN_A_SCRIPT

NOTEBOOK_ON_ONE_LOOP = f"""\
{NOTEBOOK}
# A notebook

```python
import asyncio

loop = asyncio.get_running_loop()
await asyncio.sleep(0)
```

```python
assert asyncio.get_running_loop() is loop
```
"""


@pytest.mark.parametrize(
    ("text", "error", "match"),
    [
        (AWAIT_IN_A_SCRIPT, SyntaxError, "'await' outside function"),
        (RUN_SYNC_IN_A_NOTEBOOK, UserError, "run_sync"),
    ],
    ids=["await in a script", "run_sync in a notebook"],
)
def test_a_page_that_breaks_the_rule_fails(
    text: str, error: type[Exception], match: str, page_dir: Path
) -> None:
    page = page_dir / "page.md"
    page.write_text(text, encoding="utf-8")
    with pytest.raises(error, match=match):
        run_page(page, page_dir)


def test_a_script_error_points_at_the_page_line(page_dir: Path) -> None:
    page = page_dir / "page.md"
    page.write_text(AWAIT_IN_A_SCRIPT, encoding="utf-8")
    assert breaks_the_rule(page) == "line 12: 'await' outside function"


def test_a_notebook_runs_its_cells_on_one_loop(page_dir: Path) -> None:
    page = page_dir / "notebook.md"
    page.write_text(NOTEBOOK_ON_ONE_LOOP, encoding="utf-8")
    run_page(page, page_dir)


def test_every_page_is_linked_from_an_index() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    # docs/index.md is the documentation site's home: an index itself.
    pages = [p for p in PAGES if p.parent.name == "docs" and p.name != "index.md"]
    missing = [p.name for p in pages if f"docs/{p.name}" not in readme]
    assert missing == []
