"""MkDocs hooks of the documentation site (``mkdocs.yml``), and its griffe extension.

Before a build, every public name (``scripts/_public_api.py``) must have a docstring, and so
must every public method and property of a public class; every public module must have its
page under ``docs/reference/``, and no page there may name a module that is not public. Each
failure is a warning, so ``mkdocs build --strict`` (``bash scripts/docs.sh``) fails on it.

``ReStructuredText`` is the griffe extension that lets the docstrings keep their Sphinx habits
on the site: ``:class:`Name``` becomes ``Name`` as code, and a ``::`` literal block becomes a
fenced code block (Python when it parses as Python).
"""

from __future__ import annotations

import ast
import logging
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

import griffe

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _public_api

log = logging.getLogger("mkdocs.plugins.aniki")

REFERENCE = _public_api.ROOT / "docs" / "reference"
DIRECTIVE = re.compile(r"^::: *([\w.]+) *$", re.M)
# pytest's hooks and the conformance suite's checks: their names say what they do.
UNDOCUMENTED_METHODS = re.compile(r"^(test_\w+|setup_method|teardown_method)$")


def on_pre_build(config: Any) -> None:
    """Warn about every missing docstring and reference page before anything renders."""
    for problem in problems():
        log.warning(problem)


def problems() -> list[str]:
    """What the API reference lacks, one sentence each (empty when it is complete)."""
    modules = _public_api.public_modules()
    return [*missing_pages(modules), *missing_docstrings(_public_api.load(), modules)]


def missing_pages(modules: list[str]) -> list[str]:
    """A page per public module, each with its ``::: module`` directive, and no others."""
    documented: dict[str, Path] = {}
    for page in sorted(REFERENCE.glob("*.md")):
        for name in DIRECTIVE.findall(page.read_text(encoding="utf-8")):
            documented[name] = page
    found = [
        f"public module {name} has no page in docs/reference/: add {name}.md with '::: {name}'"
        for name in modules
        if name not in documented
    ]
    found += [
        f"docs/reference/{page.name} documents {name}, which is not a public module "
        "(scripts/_public_api.py says which are)"
        for name, page in documented.items()
        if name not in modules
    ]
    return found


def missing_docstrings(package: griffe.Module, modules: list[str]) -> list[str]:
    """Public names, and public methods and properties of public classes, with no docstring."""
    found: dict[str, str] = {}
    for public, obj in _public_api.public_names(package, modules):
        if not obj.docstring and obj.path not in found:
            found[obj.path] = f"{_named(public, obj.path)} has no docstring"
        if obj.is_class:
            for name, member in obj.all_members.items():
                if name.startswith("_") or UNDOCUMENTED_METHODS.match(name):
                    continue
                target = member.final_target if isinstance(member, griffe.Alias) else member
                callable_ = target.is_function or "property" in target.labels
                if callable_ and not target.docstring and target.path not in found:
                    named = _named(f"{public}.{name}", target.path)
                    found[target.path] = f"{named} has no docstring"
    return sorted(found.values())


def _named(public: str, defined: str) -> str:
    return public if public == defined else f"{public} (defined as {defined})"


# --- the griffe extension --------------------------------------------------------------------

# :class:`Name`, :meth:`~a.b.Name.method` (shown as ``method``), :meth:`text <target>`,
# :doc:`page` (shown as ``docs/page.md``).
ROLE = re.compile(
    r":(?:py:)?(class|func|meth|mod|attr|data|exc|obj|const|doc):`(~?)([^`<]+?)(?: <[^`>]+>)?`"
)
LITERAL = re.compile(r"^(?P<indent>[ \t]*)(?P<text>.*?)(?P<space>\s?)::[ \t]*\n\n", re.M)


class ReStructuredText(griffe.Extension):
    """Turns the Sphinx roles and literal blocks of aniki's docstrings into Markdown."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite ``obj``'s docstring before griffe parses it."""
        if obj.docstring is not None:
            obj.docstring.value = to_markdown(obj.docstring.value)


def to_markdown(text: str) -> str:
    """``text`` with its roles as code and its ``::`` literal blocks fenced."""
    text = ROLE.sub(_role, text)
    out: list[str] = []
    rest = text
    while (match := LITERAL.search(rest)) is not None:
        indent = match.group("indent")
        out.append(rest[: match.start()])
        lead = match.group("text")
        if lead:
            out.append(f"{indent}{lead}{'' if match.group('space') else ':'}\n\n")
        block, rest = _literal_block(rest[match.end() :], len(indent.expandtabs()))
        code = textwrap.dedent(block).strip("\n")
        out.append(textwrap.indent(f"```{_language(code)}\n{code}\n```\n", indent))
    out.append(rest)
    return "".join(out)


def _role(match: re.Match[str]) -> str:
    role, tilde, name = match.groups()
    if role == "doc":
        return f"`docs/{name}.md`"
    return f"`{name.rsplit('.', 1)[-1] if tilde else name}`"


def _literal_block(text: str, indent: int) -> tuple[str, str]:
    """Split ``text`` after the lines indented deeper than ``indent`` (blank lines inside)."""
    lines = text.splitlines(keepends=True)
    end = 0
    for number, line in enumerate(lines):
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        end = number + 1
    while end and not lines[end - 1].strip():
        end -= 1
    block = "".join(lines[:end])
    rest = "".join(lines[end:])
    return block, "\n" + rest if rest and not rest.startswith("\n") else rest


def _language(code: str) -> str:
    try:
        ast.parse(code)
    except SyntaxError:
        return "text"
    return "python"
