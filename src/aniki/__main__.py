"""``python -m aniki``: the same as the ``aniki`` command."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
