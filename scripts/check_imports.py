"""Check aniki's import structure against docs/architecture.md: no import circle, and no import
from a lower layer to a higher one beyond the exceptions named there.

Every import counts: at the top of a module, inside a function, and under ``TYPE_CHECKING``
(a deferred import still ties two modules together). Run by CI; exits 1 with the offending
imports listed, 0 with a one-line summary.

    python scripts/check_imports.py [--graph]     # --graph: print every module's layer
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "src" / "aniki"

# The layers of docs/architecture.md, lowest first: a module may import its own layer or a
# lower one. A module is placed by the longest prefix of its dotted name listed here.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "base",
        (
            "aniki.errors", "aniki._checks", "aniki._secrets", "aniki._threads", "aniki._aio",
            "aniki._docstrings", "aniki._jsonschema", "aniki.usage", "aniki.reports",
            "aniki._report_record", "aniki.parts", "aniki._stamps", "aniki.messages",
            "aniki.context", "aniki.memory", "aniki.pricing", "aniki._tool_call",
        ),
    ),
    (
        "contracts",
        (
            "aniki.events", "aniki.result", "aniki.output", "aniki.providers.base",
            "aniki.tokens", "aniki.tools", "aniki.guardrails",
        ),
    ),
    ("providers", ("aniki.providers",)),
    ("sessions", ("aniki.sessions",)),
    ("agent", ("aniki.agent", "aniki._agent_checks")),
    ("run engine", ("aniki._run", "aniki.runner")),
    ("integrations", ("aniki.mcp", "aniki.tracing", "aniki.testing", "aniki.durable")),
    ("apps", ("aniki.cli", "aniki.inspector", "aniki.__main__", "aniki")),
)  # fmt: skip
# "aniki" stands for the facade (src/aniki/__init__.py) alone: every other module must be
# listed, so that a new one is placed on purpose rather than on the top floor by default.

# Imports that run up a layer on purpose; docs/architecture.md gives each one's reason.
# (importer, imported): both exact module names.
EXCEPTIONS: frozenset[tuple[str, str]] = frozenset(
    {
        ("aniki.sessions.policies._summarizer", "aniki.agent"),
        ("aniki.sessions.policies._summarizer", "aniki.runner"),
    }
)


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package: dotted name -> file."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """The package's modules that ``name`` imports, each with the line of the import."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            stem = ".".join(base + ([node.module] if node.module else []))
            targets = [f"{stem}.{alias.name}" for alias in node.names] + [stem]
        else:
            continue
        for target in targets:
            module = _resolve(target, known)
            if module is None or module == name or name.startswith(module + "."):
                continue  # itself, or a package importing from inside itself
            if path.name == "__init__.py" and module.startswith(name + "."):
                continue
            yield module, node.lineno


def _resolve(dotted: str, known: dict[str, Path]) -> str | None:
    while dotted and dotted not in known:
        dotted = dotted.rpartition(".")[0]
    return dotted or None


def layer_of(module: str) -> int:
    """The index of ``module``'s layer (by the longest listed prefix)."""
    best, best_length = -1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            below = prefix != "aniki" and module.startswith(prefix + ".")
            if (module == prefix or below) and len(prefix) > best_length:
                best, best_length = index, len(prefix)
    if best < 0:
        raise SystemExit(f"{module} is in no layer: add it to LAYERS in {__file__}")
    return best


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", action="store_true", help="print every module's layer")
    args = parser.parse_args()
    known = modules(ROOT)
    edges: dict[str, set[str]] = {name: set() for name in known}
    upward: list[str] = []
    used_exceptions: set[tuple[str, str]] = set()
    for name, path in known.items():
        for target, line in imports(name, path, known):
            edges[name].add(target)
            if layer_of(target) <= layer_of(name):
                continue
            if (name, target) in EXCEPTIONS:
                used_exceptions.add((name, target))
                continue
            upward.append(
                f"{path.relative_to(ROOT.parent.parent)}:{line}: {name} "
                f"({LAYERS[layer_of(name)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
            )
    if args.graph:
        for name in sorted(known, key=lambda n: (layer_of(n), n)):
            print(f"{LAYERS[layer_of(name)][0]:>12}  {name}")
    found = circles(edges)
    for component in found:
        print(f"import circle of {len(component)}: {', '.join(component)}")
    for line in sorted(set(upward)):
        print(f"upward import: {line}")
    for stale in sorted(EXCEPTIONS - used_exceptions):
        print(f"listed exception no longer used (remove it): {stale[0]} -> {stale[1]}")
    failed = bool(found or upward or EXCEPTIONS - used_exceptions)
    print(
        f"{len(known)} modules, {sum(map(len, edges.values()))} imports, {len(found)} circles, "
        f"{len(set(upward))} upward imports outside the {len(EXCEPTIONS)} named exceptions"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
