#!/usr/bin/env bash
# Build the sdist and the wheel, check them, and use the wheel as a user would: installed with
# every extra into a fresh virtual environment outside the repository, and run from a
# directory outside it too.
#
#   bash scripts/check_dist.sh          # the built files are left in dist/
#
# Building and checking need the dev extra (build, twine) in .venv. The fresh environment
# installs the wheel's dependencies with pip, as a user's would. Set PYTHON to choose the
# interpreter that environment is made from (default: python3).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TOOLS="$ROOT/.venv/bin/python"
PYTHON="${PYTHON:-python3}"
STEP_TIMEOUT=180 # seconds any one step may take before it counts as hung

fail() {
    echo "check_dist: $*" >&2
    exit 1
}

started=$SECONDS
step() { printf '\n== %s (%ss)\n' "$1" "$((SECONDS - started))"; }

"$TOOLS" -c "import build, twine" 2>/dev/null ||
    fail "build and twine are missing: .venv/bin/python -m pip install -e '.[dev]'"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/aniki-dist.XXXXXX")
case "$WORK/" in
"$ROOT"/*) fail "the work directory $WORK is inside the repository; set TMPDIR elsewhere" ;;
esac
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/tree" "$WORK/dist" "$WORK/run" "$WORK/home" "$WORK/plugins"

# Build from a copy of the files a checkout holds (tracked, plus new files not ignored), so
# nothing left over in the working tree (.venv, egg-info, __pycache__) can reach the dists.
step "copying the source tree"
(
    cd "$ROOT"
    git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' path; do
            if [ -e "$path" ]; then printf '%s\0' "$path"; fi
        done |
        tar --null -T - -cf - | tar -xf - -C "$WORK/tree"
)

step "building the sdist, then the wheel from the sdist"
if ! timeout "$STEP_TIMEOUT" "$TOOLS" -m build --outdir "$WORK/dist" "$WORK/tree" \
    >"$WORK/build.log" 2>&1; then
    cat "$WORK/build.log" >&2
    fail "python -m build failed"
fi
shopt -s nullglob
wheels=("$WORK"/dist/*.whl)
sdists=("$WORK"/dist/*.tar.gz)
shopt -u nullglob
[ "${#wheels[@]}" -eq 1 ] && [ "${#sdists[@]}" -eq 1 ] || fail "expected one wheel and one sdist"
WHEEL=${wheels[0]}
SDIST=${sdists[0]}
echo "built $(basename "$SDIST") and $(basename "$WHEEL")"

step "twine check"
timeout "$STEP_TIMEOUT" "$TOOLS" -m twine --no-color check --strict "$WORK"/dist/*

step "the wheel holds every file of src/aniki"
# Every file under src/aniki, Python or not, must be in the wheel: a missing template,
# stylesheet or py.typed fails only at run time, and a module read by path (the MCP
# watchdog) does too.
WHEEL_VERSION=$("$TOOLS" - "$WORK/tree/src/aniki" "$WHEEL" <<'PY'
import sys
import zipfile
from pathlib import Path

source, wheel = Path(sys.argv[1]), zipfile.ZipFile(sys.argv[2])
held = set(wheel.namelist())
files = sorted(
    path.relative_to(source.parent).as_posix()
    for path in source.rglob("*")
    if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
)
data = [name for name in files if not name.endswith(".py")]
print(f"{len(files)} files under src/aniki, {len(data)} of them not Python:", file=sys.stderr)
for name in data:
    print(f"  {name}", file=sys.stderr)
missing = [name for name in files if name not in held]
if missing:
    for name in missing:
        print(f"check_dist: the wheel lacks {name}", file=sys.stderr)
    sys.exit(1)
(metadata,) = [n for n in held if n.endswith(".dist-info/METADATA")]
lines = wheel.read(metadata).decode().splitlines()
(version,) = [line.split(": ", 1)[1] for line in lines if line.startswith("Version: ")]
if f"-{version}-" not in Path(sys.argv[2]).name:
    sys.exit(f"check_dist: the wheel's file name does not carry its version {version}")
print(version)
PY
)
echo "every file is there; the wheel's version is $WHEEL_VERSION"

step "installing the wheel with [all] (and serve, for docs/serving.md) into a fresh environment"
VENV="$WORK/venv"
"$PYTHON" -m venv "$VENV"
if ! timeout "$STEP_TIMEOUT" "$VENV/bin/python" -m pip install --disable-pip-version-check \
    "$WHEEL[all,serve]" "pytest>=8" "pytest-asyncio>=0.24" >"$WORK/install.log" 2>&1; then
    cat "$WORK/install.log" >&2
    fail "pip could not install the wheel with [all]"
fi
grep '^Successfully installed' "$WORK/install.log" | tr ' ' '\n' | grep -c '^[A-Za-z]' |
    xargs printf 'installed %s distributions\n'

# From here on: no model keys (every model is scripted), in a directory outside the repository,
# with nothing of it on the path.
cd "$WORK/run"
for name in $(compgen -e); do
    case "$name" in OPENAI_* | ANTHROPIC_*) unset "$name" ;; esac
done
unset ANIKI_STORE PYTHONPATH
export ANIKI_HOME="$WORK/home" PYTHONDONTWRITEBYTECODE=1 PYTHONNOUSERSITE=1 NO_COLOR=1
export COLUMNS=120
PY="$VENV/bin/python"
ANIKI="$VENV/bin/aniki"

step "aniki --version"
"$PY" - "$VENV" "$WHEEL_VERSION" <<'PY'
import importlib.metadata
import sys

import aniki

venv, wheel_version = sys.argv[1], sys.argv[2]
print(f"aniki imported from {aniki.__file__}")
if not aniki.__file__.startswith(venv):
    sys.exit(f"check_dist: aniki comes from {aniki.__file__}, not from {venv}")
installed = importlib.metadata.version("aniki-sdk")
if not aniki.__version__ == installed == wheel_version:
    sys.exit(f"check_dist: aniki.__version__ {aniki.__version__}, installed {installed}, "
             f"wheel {wheel_version}")
PY
shown=$(timeout 60 "$ANIKI" --version)
echo "$shown"
[ "$shown" = "aniki, version $WHEEL_VERSION" ] ||
    fail "aniki --version says '$shown', the wheel is $WHEEL_VERSION"

step "aniki demo"
timeout "$STEP_TIMEOUT" "$ANIKI" demo >"$WORK/demo.out" 2>&1 || {
    cat "$WORK/demo.out" >&2
    fail "aniki demo failed"
}
grep -q "scripted model" "$WORK/demo.out" && grep -q "found 6 messages" "$WORK/demo.out" || {
    cat "$WORK/demo.out" >&2
    fail "aniki demo did not show the tour"
}
echo "the offline tour ran ($(wc -l <"$WORK/demo.out") lines)"

step "aniki inspect over a SQLite store"
timeout "$STEP_TIMEOUT" "$PY" - "$ANIKI" "$WORK/inspect.db" <<'PY'
import re
import signal
import subprocess
import sys
import threading
import urllib.request

from aniki import Agent, Runner
from aniki.sessions import SQLiteSession
from aniki.testing import MockProvider

aniki, db = sys.argv[1], sys.argv[2]
# Killed by timeout (SIGTERM), still stop the server in the finally below.
signal.signal(signal.SIGTERM, lambda *_: sys.exit("check_dist: aniki inspect timed out"))
provider = MockProvider()
provider.enqueue_response(content="The wheel works.")
with SQLiteSession("dist-check", path=db) as session:
    agent = Agent("Checker", "You check wheels.", model="gpt-4o-mini", provider=provider,
                  session=session)
    Runner().run_sync(agent, message="Does the wheel serve pages?")

server = subprocess.Popen(
    [aniki, "inspect", f"sqlite:///{db}", "--port", "0"],
    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
)
try:
    first: list[str] = []
    reader = threading.Thread(target=lambda: first.append(server.stdout.readline()), daemon=True)
    reader.start()
    reader.join(60)
    found = re.search(r"at (http://127\.0\.0\.1:\d+/)", first[0] if first else "")
    if not found:
        server.kill()
        _, err = server.communicate(timeout=30)
        sys.exit(f"check_dist: aniki inspect did not say where it serves within 60 s\n{err}")
    base = found.group(1)
    with urllib.request.urlopen(base + "session?id=dist-check", timeout=30) as page:
        html = page.read().decode()
    for text in ("Does the wheel serve pages?", "The wheel works.", "inspector.css"):
        if text not in html:
            sys.exit(f"check_dist: the conversation page lacks {text!r}")
    with urllib.request.urlopen(base + "inspector.css", timeout=30) as page:
        if page.status != 200 or not page.read():
            sys.exit("check_dist: the inspector's stylesheet is not served")
    print(f"served {base}session?id=dist-check and its stylesheet")
finally:
    if server.poll() is None:
        server.send_signal(signal.SIGINT)
        try:
            server.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.communicate(timeout=30)
PY

step "an MCP server over stdio (examples/mcp_tools.py)"
mkdir -p "$WORK/example"
cp "$ROOT/examples/mcp_tools.py" "$ROOT/examples/_mcp_server.py" "$ROOT/examples/_model.py" \
    "$WORK/example/"
timeout "$STEP_TIMEOUT" "$PY" "$WORK/example/mcp_tools.py" >"$WORK/mcp.out" 2>&1 || {
    cat "$WORK/mcp.out" >&2
    fail "examples/mcp_tools.py failed"
}
grep -q "tool: Order A-1009: shipped with PostNord, arriving Thursday." "$WORK/mcp.out" || {
    cat "$WORK/mcp.out" >&2
    fail "examples/mcp_tools.py did not get the MCP tool's answer"
}
grep "tools from the MCP server" "$WORK/mcp.out"

step "the documentation's code blocks (tests/docs/test_docs.py)"
# A plugin that refuses to run unless aniki is the installed wheel, whatever pytest puts on
# sys.path (the repository's pytest settings add its root).
cat >"$WORK/plugins/aniki_from_wheel.py" <<'PY'
import sys

import pytest


def pytest_configure(config):
    import aniki

    if not aniki.__file__.startswith(sys.prefix):
        raise pytest.UsageError(f"aniki comes from {aniki.__file__}, not the installed wheel")


def pytest_terminal_summary(terminalreporter):
    import aniki

    terminalreporter.write_line(f"aniki imported from {aniki.__file__}")
PY
PYTHONPATH="$WORK/plugins" timeout "$STEP_TIMEOUT" "$PY" -m pytest -q -p aniki_from_wheel \
    -p no:cacheprovider "$ROOT/tests/docs/test_docs.py"

step "done"
mkdir -p "$ROOT/dist"
cp "$WHEEL" "$SDIST" "$ROOT/dist/"
"$TOOLS" - "$WHEEL" "$SDIST" <<'PY'
import os
import sys
import zipfile

wheel, sdist = sys.argv[1], sys.argv[2]
names = zipfile.ZipFile(wheel).namelist()
print(f"wheel: {os.path.basename(wheel)}, {os.path.getsize(wheel):,} bytes, {len(names)} files")
print(f"sdist: {os.path.basename(sdist)}, {os.path.getsize(sdist):,} bytes")
PY
echo "copied both to dist/; every check passed in $((SECONDS - started)) s"
