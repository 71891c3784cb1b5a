"""Read a function's description and per-parameter descriptions from its docstring.

Google (``Args:``), NumPy (``Parameters`` / ``----------``) and reST (``:param x:``) styles are
understood; anything else yields the whole docstring as the description.
"""

from __future__ import annotations

import inspect
import re

__all__ = ["parse_docstring"]

_GOOGLE_ARGS = re.compile(r"^(args|arguments|parameters|params|keyword args|kwargs):\s*$", re.I)
_GOOGLE_SECTION = re.compile(
    r"^(args|arguments|parameters|params|keyword args|kwargs|returns?|yields?|raises?|"
    r"examples?|notes?|attributes|see also|warnings?|todo):\s*$",
    re.I,
)
_GOOGLE_ITEM = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
_NUMPY_HEADER = re.compile(r"^-{3,}\s*$")
_NUMPY_ITEM = re.compile(r"^(\*{0,2}\w+)\s*(:.*)?$")
_REST_PARAM = re.compile(r"^:(?:param|parameter|arg|argument)\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")
_REST_FIELD = re.compile(r"^:\w+")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Return ``(description, {parameter: description})`` read from ``doc``."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    for finder in (_numpy_sections, _google_sections, _rest_sections):
        found = finder(lines)
        if found is not None:
            start, params = found
            return _join(lines[:start]), params
    return _join(lines), {}


def _join(lines: list[str]) -> str:
    paragraphs: list[str] = []
    current: list[str] = []
    for line in lines:
        if line.strip():
            current.append(line.strip())
        elif current:
            paragraphs.append(" ".join(current))
            current = []
    if current:
        paragraphs.append(" ".join(current))
    return "\n\n".join(paragraphs)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _google_sections(lines: list[str]) -> tuple[int, dict[str, str]] | None:
    first = next((i for i, line in enumerate(lines) if _GOOGLE_SECTION.match(line.strip())), None)
    if first is None:
        return None
    params: dict[str, str] = {}
    i = first
    while i < len(lines):
        if not _GOOGLE_ARGS.match(lines[i].strip()):
            i += 1
            continue
        base = _indent(lines[i])
        i += 1
        item_indent: int | None = None
        name: str | None = None
        while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > base):
            line = lines[i]
            if line.strip():
                if item_indent is None:
                    item_indent = _indent(line)
                match = _GOOGLE_ITEM.match(line.strip())
                if _indent(line) == item_indent and match:
                    name = match.group(1).lstrip("*")
                    params[name] = match.group(3).strip()
                elif name is not None:
                    params[name] = f"{params[name]} {line.strip()}".strip()
            i += 1
    return first, params


def _numpy_sections(lines: list[str]) -> tuple[int, dict[str, str]] | None:
    headers = [
        i
        for i in range(1, len(lines))
        if _NUMPY_HEADER.match(lines[i].strip()) and lines[i - 1].strip()
    ]
    if not headers:
        return None
    params: dict[str, str] = {}
    for header in headers:
        if lines[header - 1].strip().lower() not in {"parameters", "other parameters"}:
            continue
        end = next((h - 1 for h in headers if h > header), len(lines))
        name: str | None = None
        for line in lines[header + 1 : end]:
            if not line.strip():
                continue
            match = _NUMPY_ITEM.match(line)
            if _indent(line) == 0 and match:
                name = match.group(1).lstrip("*")
                params[name] = ""
            elif name is not None:
                params[name] = f"{params[name]} {line.strip()}".strip()
    return headers[0] - 1, params


def _rest_sections(lines: list[str]) -> tuple[int, dict[str, str]] | None:
    first = next((i for i, line in enumerate(lines) if _REST_FIELD.match(line.strip())), None)
    if first is None:
        return None
    params: dict[str, str] = {}
    name: str | None = None
    for line in lines[first:]:
        stripped = line.strip()
        match = _REST_PARAM.match(stripped)
        if match:
            name = match.group(1)
            params[name] = match.group(2).strip()
        elif _REST_FIELD.match(stripped):
            name = None
        elif name is not None and stripped:
            params[name] = f"{params[name]} {stripped}"
    return first, params
