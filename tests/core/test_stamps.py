"""The ids a store stamps on appended messages, and a run's id: random, unique, never shared
with a fork."""

from __future__ import annotations

import os
import re
import sys
import uuid

import pytest

from aniki import Context, Message
from aniki._stamps import stamp, stamp_one

ID = re.compile(r"[0-9a-f]{16}")


def test_appended_messages_get_distinct_16_digit_ids() -> None:
    message = Message(role="user", content="hi")
    ids = [stamp_one(message).id for _ in range(1000)] + [m.id for m in stamp([message] * 300)]
    assert all(i is not None and ID.fullmatch(i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_a_run_id_is_a_random_uuid_as_hex() -> None:
    ids = [Context().run_id for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for run_id in ids:
        made = uuid.UUID(hex=run_id)
        assert made.hex == run_id and made.version == 4 and made.variant == uuid.RFC_4122
    # Every digit but the version's varies (the variant's among 8, 9, a, b).
    assert all(len({i[n] for i in ids}) >= 4 for n in range(32) if n != 12)
    assert Context(run_id="mine").run_id == "mine"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
@pytest.mark.skipif(sys.platform == "darwin", reason="fork after threads is unsafe on macOS")
def test_a_forked_child_never_hands_out_its_parents_next_ids() -> None:
    message = Message(role="user", content="hi")
    stamp_one(message)  # ids are drawn ahead now
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        os.close(read)
        ids = " ".join(str(stamp_one(message).id) for _ in range(20))
        os.write(write, ids.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split())
    os.waitpid(pid, 0)
    parent = {stamp_one(message).id for _ in range(20)}
    assert len(child) == 20
    assert not child & parent
