"""Child process of the kill -9 tests: appends until it is killed, acknowledging each commit.

Usage: ``python _kill_child.py sqlite|file LOCATION DURABILITY [huge]``. Prints ``ready``,
then the index of every append once it has returned (so it is acknowledged), flushing each
line. Odd indexes are batches of three messages; every seventh append carries 300 kB of
content, and with ``huge`` every message carries 4 MB, so that a kill can land in the middle
of a single ``write`` (Linux then leaves a torn last line).
"""

from __future__ import annotations

import sys

from aniki import Message
from aniki.sessions import FileSession, SQLiteSession


def content(index: int, part: int, huge: bool = False) -> str:
    """The content of message ``part`` of append ``index`` (the parent checks it)."""
    if huge:
        return f"{index}:{part}:" + "x" * 4_000_000
    filler = "\u00e9x" * 150_000 if index % 7 == 0 else ""
    return f"{index}:{part}:{filler}"


def main() -> None:
    kind, location, durability = sys.argv[1:4]
    huge = sys.argv[4:] == ["huge"]
    if kind == "sqlite":
        session = SQLiteSession("victim", location, durability=durability)  # type: ignore[arg-type]
    else:
        session = FileSession("victim", location, durability=durability)  # type: ignore[arg-type]
    print("ready", flush=True)
    index = 0
    while True:
        if index % 2:
            session.add_messages(
                [Message(role="user", content=content(index, part, huge)) for part in range(3)]
            )
        else:
            session.add_message(Message(role="assistant", content=content(index, 0, huge)))
        print(index, flush=True)
        index += 1


if __name__ == "__main__":
    main()
