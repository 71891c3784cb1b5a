#!/usr/bin/env bash
# Build the documentation site (mkdocs.yml) strictly into site/: a broken link or anchor, a
# page left out of the nav, a public name without a docstring, or a docstring griffe cannot
# parse fails the build. `bash scripts/docs.sh serve` serves it on 127.0.0.1:8000 instead,
# rebuilding on changes (extra arguments go to mkdocs).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
if ! .venv/bin/python -c "import aniki, material, mkdocs, mkdocstrings_handlers.python" 2>/dev/null; then
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[docs]"
fi
# Material prints a notice about its own future on every build; the build is what matters here.
export NO_MKDOCS_2_WARNING=1
if [ "${1:-}" = "serve" ]; then
    shift
    exec .venv/bin/mkdocs serve --dev-addr 127.0.0.1:8000 "$@"
fi
exec .venv/bin/mkdocs build --strict --clean "$@"
