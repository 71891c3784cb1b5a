"""aniki's public API as griffe sees it: which modules are public, and their exported names.

Shared by the docs build (``scripts/docs_hooks.py``) and the API check
(``scripts/api_check.py``), so that both speak of the same surface:

- a public module is a package of ``src/aniki`` whose ``__init__`` defines ``__all__`` and
  whose dotted path has no ``_private`` part, plus the plain modules in ``PUBLIC_MODULES``
  (the docs import from them);
- its public names are its ``__all__``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import griffe

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PACKAGE = "aniki"

# Plain modules (not packages) that the docs teach users to import from.
PUBLIC_MODULES = ("aniki.pricing", "aniki.tokens")


def load(src: Path = SRC) -> griffe.Module:
    """The ``aniki`` package found under ``src``, statically, with its aliases resolved."""
    package = griffe.load(
        PACKAGE,
        search_paths=[str(src)],
        resolve_aliases=True,
        resolve_external=False,
        try_relative_path=False,
    )
    assert isinstance(package, griffe.Module)
    return package


def public_modules(src: Path = SRC) -> list[str]:
    """The dotted paths of the public modules, sorted (``aniki`` first)."""
    found = {
        name
        for name in PUBLIC_MODULES
        if src.joinpath(*name.split(".")).with_suffix(".py").exists()
    }
    for init in (src / PACKAGE).rglob("__init__.py"):
        parts = init.parent.relative_to(src).parts
        if any(part.startswith("_") for part in parts):
            continue
        if "__all__" in init.read_text(encoding="utf-8"):
            found.add(".".join(parts))
    return sorted(found)


def module(package: griffe.Module, path: str) -> griffe.Module:
    """The module ``path`` (dotted, from ``aniki``) of a loaded package."""
    found = package if path == PACKAGE else package[path.removeprefix(PACKAGE + ".")]
    assert isinstance(found, griffe.Module), path
    return found


def exports(mod: griffe.Module) -> list[str]:
    """The names in a module's ``__all__`` (empty when it has none)."""
    return [str(name) for name in mod.exports or ()]


def public_names(package: griffe.Module, modules: list[str]) -> Iterator[tuple[str, griffe.Object]]:
    """Each public name as ``(module.name, object)``, aliases followed to what they name."""
    for path in modules:
        mod = module(package, path)
        for name in exports(mod):
            if name not in mod.members:
                raise LookupError(f"{path}.__all__ lists {name!r}, which is not defined there")
            member = mod.members[name]
            target = member.final_target if isinstance(member, griffe.Alias) else member
            yield f"{path}.{name}", target
