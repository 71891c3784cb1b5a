#!/usr/bin/env bash
# Set up a virtual environment and run `aniki demo`: an offline tour of aniki.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[cli,tokens]"
exec .venv/bin/aniki demo "$@"
