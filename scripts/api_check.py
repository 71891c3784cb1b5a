"""Compare aniki's public API with the last release's: a breaking change fails the check
unless the changelog announces it.

The public API is every name in ``__all__`` of a public module (``scripts/_public_api.py``
says which modules are public), and for a class its public members, inherited ones
included. A tree's API is written down as its *surface*: for each public module and name,
the kind of object; for a function its parameters (name, kind, annotation, default) and
return annotation; for a class its bases and members. griffe's ``find_breaking_changes``
compares the baseline's surface with the tree's, so a removed name or member, a removed
parameter, one that became required, moved, or changed kind or default, a new required
parameter, a removed base class or a removed return annotation is a breaking change.
Additions are not.

A breaking change passes when ``CHANGELOG.md``'s ``## [Unreleased]`` section names it under a
``### Changed`` or ``### Removed`` heading: the name as the message prints it, relative to its
module (``Runner.run``; the class for its constructor, ``SQLiteSession``; the name for a
module-level name, ``open_session``), or with the module in front (``aniki.Runner.run``).

    python scripts/api_check.py                    # against the newest api/aniki-*.json
    python scripts/api_check.py --baseline api/aniki-0.1.0.json --changelog CHANGELOG.md
    python scripts/api_check.py --write api/aniki-X.Y.Z.json   # write the tree's surface

The baseline is a committed file, ``api/aniki-VERSION.json``: the surface of the tree that was
released as VERSION (the first, 0.1.0, is the tree that carried that version before a release
was tagged). A release refreshes it: once the release's changelog section is written and the
version set, run ``python scripts/api_check.py --write api/aniki-NEW.json`` on the released
tree, delete the previous baseline, and commit both with the release. From then on, the next
release's changes are checked against it.

Exits 1 with each unannounced breaking change listed, 0 with a one-line summary.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import griffe

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _public_api

BASELINES = _public_api.ROOT / "api"
CHANGELOG = _public_api.ROOT / "CHANGELOG.md"
FORMAT = 1  # of the surface files; a change to what they hold bumps it

Surface = dict[str, dict[str, dict[str, Any]]]  # module -> name -> description


# --- a tree's surface ------------------------------------------------------------------------


def surface(src: Path = _public_api.SRC, package: griffe.Module | None = None) -> Surface:
    """The public API of the ``aniki`` package under ``src``, as plain data."""
    package = package or _public_api.load(src)
    found: Surface = {}
    for path in _public_api.public_modules(src):
        module = _public_api.module(package, path)
        found[path] = {}
        for name in sorted(_public_api.exports(module)):
            member = module.members[name]
            found[path][name] = describe(member)
    return found


def describe(obj: griffe.Object | griffe.Alias, depth: int = 0) -> dict[str, Any]:
    """One object as plain data: what griffe's comparison looks at, and annotations."""
    if isinstance(obj, griffe.Alias):
        alias = obj
        try:
            obj = alias.final_target
        except griffe.AliasResolutionError:
            return {"kind": "alias", "target": alias.target_path}
    if isinstance(obj, griffe.Function):
        found: dict[str, Any] = {
            "kind": "function",
            "parameters": [_parameter(parameter) for parameter in obj.parameters],
        }
        if obj.returns is not None:
            found["returns"] = str(obj.returns)
        return found
    if isinstance(obj, griffe.Class):
        members = {}
        if depth < 3:
            for name, member in sorted(obj.all_members.items()):
                if _public_member(name, member):
                    members[name] = describe(member, depth + 1)
        return {"kind": "class", "bases": [str(base) for base in obj.bases], "members": members}
    if isinstance(obj, griffe.Attribute):
        if obj.annotation is None:
            return {"kind": "attribute"}
        return {"kind": "attribute", "annotation": str(obj.annotation)}
    return {"kind": obj.kind.value}


def _public_member(name: str, member: griffe.Object | griffe.Alias) -> bool:
    if name.startswith("__") and name.endswith("__"):
        # __init__, __call__, __aenter__ ... are API; __slots__, __match_args__ are not.
        return member.is_function
    return not name.startswith("_")


def _parameter(parameter: griffe.Parameter) -> dict[str, Any]:
    kind = parameter.kind or griffe.ParameterKind.positional_or_keyword
    found = {"name": parameter.name, "kind": griffe.ParameterKind(kind).value}
    if parameter.annotation is not None:
        found["annotation"] = str(parameter.annotation)
    if parameter.default is not None:
        found["default"] = str(parameter.default)
    return found


# --- griffe objects from a surface, and their comparison -------------------------------------


def rebuild(surface: Surface) -> dict[str, griffe.Module]:
    """griffe modules holding a surface's names, for ``griffe.find_breaking_changes``."""
    collection = griffe.ModulesCollection()
    modules = {}
    for path, names in surface.items():
        module = griffe.Module(path, modules_collection=collection)
        module.exports = list(names)
        for name, description in names.items():
            module.set_member(name, _object(name, description))
        modules[path] = module
    return modules


def _object(name: str, description: dict[str, Any]) -> griffe.Object:
    kind = description["kind"]
    if kind == "function":
        parameters = [
            griffe.Parameter(
                p["name"],
                kind=griffe.ParameterKind(p["kind"]),
                annotation=p.get("annotation"),
                default=p.get("default"),
            )
            for p in description["parameters"]
        ]
        return griffe.Function(
            name, parameters=griffe.Parameters(*parameters), returns=description.get("returns")
        )
    if kind == "class":
        cls = griffe.Class(name, bases=list(description["bases"]))
        for member, member_description in description["members"].items():
            cls.set_member(member, _object(member, member_description))
        return cls
    if kind == "attribute":
        return griffe.Attribute(name, annotation=description.get("annotation"))
    # An alias griffe could not follow, or a module: compared by kind only.
    return griffe.Attribute(name, value=kind)


def breaking_changes(old: Surface, new: Surface) -> dict[str, list[str]]:
    """Each breaking change from ``old`` to ``new``: the name to announce, and what changed."""
    found: dict[str, list[str]] = {}
    old_modules, new_modules = rebuild(old), rebuild(new)
    for path, old_module in old_modules.items():
        new_module = new_modules.get(path)
        if new_module is None:
            found.setdefault(path, []).append(f"{path}: public module was removed")
            continue
        for breakage in griffe.find_breaking_changes(old_module, new_module):
            name, message = _explain(path, breakage)
            if message not in found.get(name, []):
                found.setdefault(name, []).append(message)
    return found


def _explain(module: str, breakage: griffe.Breakage) -> tuple[str, str]:
    """The name to announce (relative to its module), and one line saying what changed."""
    name = breakage.obj.path.removeprefix(module + ".").removesuffix(".__init__")
    what = breakage.kind.value
    old, new = breakage.old_value, breakage.new_value
    detail = ""
    if isinstance(old, griffe.Parameter) or isinstance(new, griffe.Parameter):
        parameter = old if isinstance(old, griffe.Parameter) else new
        detail = f"({parameter.name})"
        if breakage.kind is griffe.BreakageKind.PARAMETER_CHANGED_DEFAULT:
            what += f": {old.default} -> {new.default}"
        elif breakage.kind is griffe.BreakageKind.PARAMETER_CHANGED_KIND:
            what += f": {old.kind.value} -> {new.kind.value}"
    elif breakage.kind is griffe.BreakageKind.OBJECT_CHANGED_KIND:
        what += f": {old.value} -> {new.value}"
    elif breakage.kind is griffe.BreakageKind.CLASS_REMOVED_BASE:
        what += f": {[str(base) for base in old]} -> {[str(base) for base in new]}"
    elif breakage.kind is griffe.BreakageKind.RETURN_CHANGED_TYPE:
        what += f": {old} -> {new}"
    return name, f"{module}.{name}{detail}: {what}"


# --- the changelog ---------------------------------------------------------------------------


def announced(changelog: str) -> str:
    """The text under ``### Changed`` and ``### Removed`` of the ``## [Unreleased]`` section."""
    unreleased = re.search(
        r"^## \[Unreleased\][^\n]*\n(.*?)(?=^## |\Z)", changelog, re.M | re.S | re.I
    )
    if unreleased is None:
        return ""
    parts = re.findall(
        r"^### (?:Changed|Removed)[^\n]*\n(.*?)(?=^### |\Z)", unreleased.group(1), re.M | re.S
    )
    return "\n".join(parts)


def mentions(text: str, name: str) -> bool:
    """Whether ``text`` names ``name`` as a whole: ``Runner.run`` is not ``Runner.run_sync``,
    and ``run`` is not ``Runner.run``."""
    return re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", text) is not None


# --- the command -----------------------------------------------------------------------------


def newest_baseline(directory: Path = BASELINES) -> Path:
    """The ``aniki-VERSION.json`` of ``directory`` with the highest version."""

    def version(path: Path) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", path.stem))

    found = sorted(directory.glob("aniki-*.json"), key=version)
    if not found:
        raise SystemExit(f"api_check: no baseline api/aniki-*.json in {directory}")
    return found[-1]


def check(baseline: Path, changelog: Path, src: Path = _public_api.SRC) -> tuple[bool, list[str]]:
    """Whether the tree under ``src`` may ship against ``baseline``, and the report's lines."""
    old = load_surface(baseline)
    new = surface(src)
    changes = breaking_changes(old, new)
    text = announced(changelog.read_text(encoding="utf-8")) if changelog.exists() else ""
    unannounced = {
        name: messages
        for name, messages in changes.items()
        if not any(mentions(text, candidate) for candidate in _candidates(name, messages))
    }
    names = sum(len(names) for names in new.values())
    if not unannounced:
        summary = f"{len(changes)} breaking change(s), each announced in {changelog.name}"
        return True, [
            f"api_check: {names} public names in {len(new)} modules against "
            f"{baseline.name}: {summary if changes else 'no breaking change'}"
        ]
    lines = [f"  {message}" for name in sorted(unannounced) for message in unannounced[name]]
    return False, [
        f"api_check: {len(unannounced)} breaking change(s) against {baseline.name} that "
        f"{changelog.name} does not announce:",
        *lines,
        "Name each under '### Changed' or '### Removed' in its '## [Unreleased]' section "
        f"({', '.join(sorted(unannounced))}), or restore what it was.",
    ]


def _candidates(name: str, messages: Iterable[str]) -> Iterator[str]:
    yield name
    for message in messages:
        yield message.split(":", 1)[0].split("(", 1)[0]  # the name with its module


# A baseline file holds each object once, under the path where it is defined ("objects"),
# and each public module's names as those paths ("modules"): the facade re-exports most names.


def load_surface(path: Path) -> Surface:
    """A surface written by ``--write``."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("format") != FORMAT:
        raise SystemExit(f"api_check: {path} is of format {data.get('format')}, not {FORMAT}")
    objects = data["objects"]
    return {
        module: {name: objects[key] for name, key in names.items()}
        for module, names in data["modules"].items()
    }


def write_surface(path: Path, src: Path = _public_api.SRC) -> None:
    """Write the surface of the tree under ``src`` to ``path``, as a new baseline."""
    package = _public_api.load(src)
    modules: dict[str, dict[str, str]] = {}
    objects: dict[str, dict[str, Any]] = {}
    for module, names in surface(src, package).items():
        found = _public_api.module(package, module)
        modules[module] = {}
        for name, description in names.items():
            key = _defined_at(found.members[name])
            assert objects.setdefault(key, description) == description, key
            modules[module][name] = key
    data = {"format": FORMAT, "package": _public_api.PACKAGE, "modules": modules}
    data["objects"] = objects
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_json(data) + "\n", encoding="utf-8")


def _defined_at(member: griffe.Object | griffe.Alias) -> str:
    try:
        return member.final_target.path if isinstance(member, griffe.Alias) else member.path
    except griffe.AliasResolutionError:
        return member.path


def _json(value: object, indent: str = "") -> str:
    """JSON with one key a line, except that a flat list or a small flat object (a
    parameter, an attribute) is one line."""
    flat = not any(isinstance(item, (dict, list)) for item in _items(value))
    small = not isinstance(value, dict) or len(value) <= 4
    if not isinstance(value, (dict, list)) or (flat and small):
        return json.dumps(value, sort_keys=True)
    inner = indent + " "
    if isinstance(value, list):
        lines = [inner + _json(item, inner) for item in value]
        return "[\n" + ",\n".join(lines) + "\n" + indent + "]"
    lines = [f"{inner}{json.dumps(key)}: {_json(value[key], inner)}" for key in sorted(value)]
    return "{\n" + ",\n".join(lines) + "\n" + indent + "}"


def _items(value: object) -> list[object]:
    if isinstance(value, dict):
        return list(value.values())
    return list(value) if isinstance(value, list) else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, help="default: the newest api/aniki-*.json")
    parser.add_argument("--changelog", type=Path, default=CHANGELOG)
    parser.add_argument("--src", type=Path, default=_public_api.SRC, help="where aniki/ is")
    parser.add_argument("--write", type=Path, metavar="PATH", help="write a new baseline")
    args = parser.parse_args(argv)
    if args.write:
        write_surface(args.write, args.src)
        print(f"api_check: wrote {args.write}")
        return 0
    ok, lines = check(args.baseline or newest_baseline(), args.changelog, args.src)
    print("\n".join(lines), file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
