#!/usr/bin/env bash
# Set up a virtual environment with every extra and run the whole test suite.
# Extra arguments go to pytest (e.g. `bash scripts/test.sh -k sqlite -x`).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[all,dev]"
# The live tier's model server, in its own environment under ~/.cache/aniki (built once per
# machine). When it cannot be set up, its tests skip with the reason (under CI=true, it fails).
.venv/bin/python scripts/live_server.py setup
.venv/bin/python scripts/mcp_servers.py setup
exec .venv/bin/python -m pytest "$@"
