"""The documentation site's own checks (scripts/docs_hooks.py): the API reference covers every
public module, and every public name has a docstring; docstrings' Sphinx habits become
Markdown. ``bash scripts/docs.sh`` runs the same checks in a strict build."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("griffe")

ROOT = Path(__file__).resolve().parents[2]


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "scripts" / "docs_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_covers_every_public_module_and_name() -> None:
    assert _hooks().problems() == []


def test_a_public_name_or_method_without_a_docstring_is_named(tmp_path: Path) -> None:
    hooks = _hooks()
    package = tmp_path / "aniki"
    package.mkdir()
    package.joinpath("__init__.py").write_text(
        textwrap.dedent(
            '''
            """A package."""

            __all__ = ["Suite", "bare", "documented"]


            def bare() -> None:
                pass


            def documented() -> None:
                """Has one."""


            class Suite:
                """A conformance suite."""

                def check(self) -> None:
                    pass

                def test_reads_back(self) -> None:
                    pass

                def _helper(self) -> None:
                    pass
            '''
        ),
        encoding="utf-8",
    )
    public = hooks._public_api
    modules = public.public_modules(tmp_path)
    assert modules == ["aniki"]
    assert hooks.missing_docstrings(public.load(tmp_path), modules) == [
        "aniki.Suite.check has no docstring",
        "aniki.bare has no docstring",
    ]


def test_sphinx_roles_and_literal_blocks_become_markdown() -> None:
    text = textwrap.dedent(
        """\
        Like :class:`~aniki.sessions.FileSession` and :meth:`fork <aniki.Session.fork>`.

        Example::

            session = open_session("sqlite:///chats.db")

            session.clear()

        Run it from a shell ::

            aniki inspect sqlite:///chats.db

        Then read :doc:`tools`.
        """
    )
    assert _hooks().to_markdown(text) == textwrap.dedent(
        """\
        Like `FileSession` and `fork`.

        Example:

        ```python
        session = open_session("sqlite:///chats.db")

        session.clear()
        ```

        Run it from a shell

        ```text
        aniki inspect sqlite:///chats.db
        ```

        Then read `docs/tools.md`.
        """
    )


def test_the_site_home_lists_the_pages_the_readme_lists() -> None:
    """docs/index.md repeats the README's list of pages (with links inside docs/), and adds
    the API reference, which only the site has."""

    def listed(text: str, prefix: str) -> list[str]:
        lines = [line for line in text.splitlines() if line.startswith("- [") and "](" in line]
        return [line.replace(f"]({prefix}", "](") for line in lines if f"]({prefix}" in line]

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    home = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    site_only = [line for line in listed(home, "") if "](reference/" in line]
    assert len(site_only) == 1
    assert listed(readme, "docs/") == [line for line in listed(home, "") if line not in site_only]
