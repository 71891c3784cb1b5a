"""The public facade: complete, sorted, and documented."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys

import aniki

DESIGN_NAMES = {
    "Agent",
    "Runner",
    "InMemorySession",
    "Memory",
    "Message",
    "ToolCall",
    "Context",
    "tool",
    "ValidationError",
    "Session",
    "AsyncSession",
    "RunResult",
    "StreamedRun",
    "TextDelta",
    "ToolCallStarted",
    "ToolCallCompleted",
    "StreamRestarted",
    "RunCompleted",
    "Usage",
    "ModelRequest",
    "ModelResponse",
    "Provider",
    "MaxTurnsExceeded",
    "OutputValidationError",
    "UserError",
    "ProviderError",
    "AnikiError",
}


def test_all_is_sorted_and_unique() -> None:
    assert list(aniki.__all__) == sorted(set(aniki.__all__))


def test_every_name_in_all_exists() -> None:
    missing = [name for name in aniki.__all__ if not hasattr(aniki, name)]
    assert missing == []


def test_all_lists_every_public_name_defined_in_the_facade() -> None:
    public = {
        name
        for name, value in vars(aniki).items()
        if not name.startswith("_")
        and not inspect.ismodule(value)
        and name not in {"annotations", "TYPE_CHECKING", "Any"}
    }
    assert public - set(aniki.__all__) == set()


def test_the_design_names_are_importable_from_aniki() -> None:
    assert set(aniki.__all__) >= DESIGN_NAMES


def test_every_error_is_an_aniki_error_and_validation_error_is_a_value_error() -> None:
    errors = [getattr(aniki, n) for n in aniki.__all__ if n.endswith(("Error", "Exceeded"))]
    assert all(issubclass(e, aniki.AnikiError) for e in errors)
    assert issubclass(aniki.ValidationError, ValueError)
    tree = aniki.errors.__doc__ or ""
    assert all(e.__name__ in tree for e in errors)


def test_turn_undone_error_is_exported_under_the_root() -> None:
    assert "TurnUndoneError" in aniki.__all__
    assert "TurnUndoneError" in aniki.errors.__all__
    assert aniki.TurnUndoneError is aniki.errors.TurnUndoneError
    assert issubclass(aniki.TurnUndoneError, aniki.AnikiError)
    assert "├── TurnUndoneError" in (aniki.errors.__doc__ or "")


def test_public_classes_have_docstrings() -> None:
    undocumented = [
        name
        for name in aniki.__all__
        if inspect.isclass(getattr(aniki, name)) and not inspect.getdoc(getattr(aniki, name))
    ]
    assert undocumented == []


def test_every_module_imports() -> None:
    for module in pkgutil.walk_packages(aniki.__path__, "aniki."):
        if module.name.rsplit(".", 1)[-1] in {"openai", "anthropic", "redis", "postgres"}:
            continue  # optional vendors; their own tests import them
        importlib.import_module(module.name)


def _printed_after_importing_aniki(*lines: str) -> str:
    """What a fresh interpreter prints running ``lines`` after importing aniki."""
    code = "\n".join(("import sys, aniki, aniki.sessions, aniki.providers", *lines))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_import_aniki_does_not_import_vendor_clients() -> None:
    printed = _printed_after_importing_aniki(
        "heavy = {'openai', 'anthropic', 'redis', 'psycopg', 'httpx', 'pytest'}",
        "print(sorted(heavy & set(sys.modules)))",
    )
    assert printed == "[]"


def test_pydantic_is_imported_when_a_schema_needs_it_not_with_aniki() -> None:
    printed = _printed_after_importing_aniki(
        "before = 'pydantic' in sys.modules",
        "@aniki.tool",
        "def add(a: int, b: int) -> int:",
        "    return a + b",
        "print(before, 'pydantic' in sys.modules, add.parameters['required'])",
    )
    assert printed == "False True ['a', 'b']"


def test_py_typed_ships() -> None:
    from importlib.resources import files

    assert files("aniki").joinpath("py.typed").is_file()
