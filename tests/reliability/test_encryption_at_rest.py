"""``EncryptedSession`` on every store: the raw data holds no plaintext; keys rotate; a wrong
key is a clear error that loses nothing.
"""

from __future__ import annotations

import json

import pytest

from aniki import Message, ToolCall
from aniki.sessions import DecryptionError, EncryptedSession

from .stores import Store

SECRET = "card 4242-9876-5555-0001 PIN 8812"
HISTORY = [
    Message("user", f"Remember {SECRET}"),
    Message("assistant", tool_calls=(ToolCall("c1", "charge", json.dumps({"card": SECRET})),)),
    Message("tool", f"charged {SECRET}", tool_call_id="c1"),
    Message("assistant", "Done \U0001f4b3"),
]
PIECES = [b"4242-9876", b"8812", "\U0001f4b3".encode(), b"Remember", b"charged"]


def test_no_plaintext_at_rest_and_keys_rotate(store: Store) -> None:
    driver = store.opener.driver
    key = EncryptedSession.generate_key()
    inner = store.opener.open("encrypted")
    session = EncryptedSession(inner, key)
    driver.add_messages(session, HISTORY[:2])
    driver.add_message(session, HISTORY[2])
    driver.add_message(session, HISTORY[3].to_dict())
    driver.set_meta(session, "summary", {"text": f"the user shared {SECRET}"})
    assert driver.get_messages(session) == HISTORY
    assert driver.get_meta(session, "summary") == {"text": f"the user shared {SECRET}"}

    raw = store.raw()
    assert b"charge" in raw  # the store holds the history: roles and tool names stay readable
    for piece in PIECES:
        assert piece not in raw, piece
    if store.shared:  # a restart, with the key, reads it all back
        with store.session("encrypted") as fresh:
            assert driver.get_messages(EncryptedSession(fresh, key)) == HISTORY

    new_key = EncryptedSession.generate_key()
    rotated = EncryptedSession(inner, new_key, key)
    driver.add_message(rotated, {"role": "user", "content": f"again {SECRET}"})
    assert driver.get_messages(rotated)[:4] == HISTORY
    with pytest.raises(DecryptionError):  # the newest message needs the new key
        driver.get_messages(EncryptedSession(inner, key))
    with pytest.raises(DecryptionError, match="cannot decrypt message 0 of session 'encrypted'"):
        driver.get_messages(EncryptedSession(inner, EncryptedSession.generate_key()))
    assert len(driver.get_messages(inner)) == 5  # a wrong key loses nothing
    for piece in PIECES:
        assert piece not in store.raw(), piece
