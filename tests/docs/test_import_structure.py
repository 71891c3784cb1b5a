"""The import structure docs/architecture.md draws: no circle, no import up a layer beyond the
exceptions it names. scripts/check_imports.py is the check; these tests run it on the tree
and show it catches what it is for."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_imports.py"


def _checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_imports", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "aniki"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_the_tree_has_no_circle_and_no_unnamed_upward_import() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert " 0 circles, 0 upward imports" in done.stdout


def test_every_named_exception_is_explained_in_the_architecture_page() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for importer, imported in _checker().EXCEPTIONS:
        assert f"`{importer}` → `{imported}`" in page, (importer, imported)


def test_a_circle_is_found_even_through_deferred_and_type_checking_imports(
    tmp_path: Path,
) -> None:
    checker = _checker()
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "messages.py": "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from .errors import ValidationError\n",
            "errors.py": "def f():\n    from .messages import Message\n",
            "usage.py": "from . import errors\n",
        },
    )
    known = checker.modules(root)
    edges = {
        name: {t for t, _ in checker.imports(name, path, known)} for name, path in known.items()
    }
    assert checker.circles(edges) == [["aniki.errors", "aniki.messages"]]


def test_an_import_up_a_layer_is_placed_by_the_longest_prefix() -> None:
    checker = _checker()
    assert checker.layer_of("aniki.providers.base") < checker.layer_of("aniki.providers.openai")
    assert checker.layer_of("aniki.sessions.policies._policy") < checker.layer_of("aniki.runner")
    assert checker.layer_of("aniki") == len(checker.LAYERS) - 1
    with pytest.raises(SystemExit, match=r"aniki\._unplaced is in no layer"):
        checker.layer_of("aniki._unplaced")
