#!/usr/bin/env bash
# Set up a virtual environment and run aniki's quickstart: a conversation that persists.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e .
exec .venv/bin/python examples/quickstart.py "$@"
