"""Attachment URLs with control characters are refused: a newline, a NUL, an escape or a C1
control in a URL would be sent to a provider (or shown by a terminal, a log, the inspector)
as something other than the address it looks like."""

from __future__ import annotations

import json

import pytest

from aniki import Attachment, Message, ValidationError

BASE = "https://example.com/files/report.png?size=large#top"
CONTROLS = [chr(code) for code in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0))]
# Every position: at the very start, inside the scheme, right after it, in the host, the
# path, the query and the fragment, and at the very end.
POSITIONS = [0, 3, len("https://"), len("https://exa"), BASE.index("/files") + 3]
POSITIONS += [BASE.index("size"), BASE.index("#") + 2, len(BASE)]


def _with(char: str, position: int) -> str:
    return BASE[:position] + char + BASE[position:]


@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("char", CONTROLS, ids=lambda char: f"U+{ord(char):04X}")
def test_a_url_with_a_control_character_is_refused_naming_it(char: str, position: int) -> None:
    url = _with(char, position)
    with pytest.raises(ValidationError, match="control character") as caught:
        Attachment("image/png", url=url)
    assert caught.value.field == "attachments.url"
    message = str(caught.value)
    assert f"U+{ord(char):04X}" in message
    assert f"index {position}" in message
    assert char not in message  # the error shows it escaped, never raw


@pytest.mark.parametrize("char", CONTROLS, ids=lambda char: f"U+{ord(char):04X}")
def test_a_stored_url_with_a_control_character_is_refused_when_read(char: str) -> None:
    record = {
        "role": "user",
        "content": "see this",
        "attachments": [{"media_type": "image/png", "url": _with(char, len(BASE) // 2)}],
    }
    with pytest.raises(ValidationError, match="control character"):
        Message.from_dict(json.loads(json.dumps(record)))


@pytest.mark.parametrize(
    "url",
    [
        BASE,
        "https://example.com/caf%C3%A9%0A.png",  # percent-encoded controls are just text
        "https://例え.jp/画像.png",
        "http://example.com/a b.png",  # a space is not a control character
        "https://example.com/\u00a0nbsp.png",  # U+00A0 comes right after the C1 range
    ],
)
def test_urls_without_control_characters_are_kept_exactly(url: str) -> None:
    attachment = Attachment("image/png", url=url)
    assert attachment.url == url
    assert Attachment.from_dict(attachment.to_dict()) == attachment
