"""Hypothesis strategies for hostile input: odd text, huge strings, deep nesting, wrong types.

Shared by the fuzz tests of messages, memory, stores, tool arguments and the wire formats.
Sizes are bounded so that a few hundred examples run in seconds.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from aniki import Message, ToolCall

ROLES = ["system", "user", "assistant", "tool"]
MESSAGE_KEYS = ["role", "content", "tool_calls", "tool_call_id"]
CALL_KEYS = ["id", "name", "arguments"]

# Characters that break naive code: NUL and controls, line and paragraph separators, quotes
# and escapes, path and glob syntax, SQL comment marks, a BOM, combining and wide characters.
AWKWARD = [
    "\x00",
    "\x01",
    "\x1f",
    "\x7f",
    "\n",
    "\r",
    "\t",
    "\u2028",
    "\u2029",
    "\u0085",
    "\ufeff",
    '"',
    "'",
    "\\",
    "/",
    "..",
    "*",
    "?",
    "[",
    "]",
    "{",
    "}",
    "%",
    "_",
    ";",
    "--",
    "\u0301",
    "\U0001f600",
    "\U0001f469\u200d\U0001f467",
    "\u65e5",
]
SURROGATES = ["\ud800", "\udfff", "\udc80"]

valid_char = st.one_of(st.characters(exclude_categories=["Cs"]), st.sampled_from(AWKWARD))
valid_text = st.lists(valid_char, max_size=40).map("".join)
"""Text every store must keep exactly (no lone surrogates)."""
nonempty_text = st.lists(valid_char, min_size=1, max_size=40).map("".join)
huge_text = st.builds(
    lambda piece, times: piece * times,
    st.lists(valid_char, min_size=1, max_size=4).map("".join),
    st.integers(min_value=20_000, max_value=250_000),
)
"""Text of tens to hundreds of thousands of characters."""
hostile_text = st.one_of(
    valid_text,
    st.lists(st.one_of(valid_char, st.sampled_from(SURROGATES)), max_size=20).map("".join),
    huge_text,
)
"""Any text, lone surrogates included (which no message may hold)."""


def nested(depth: int, leaf: Any, kind: str) -> Any:
    """``leaf`` inside ``depth`` lists (or dicts)."""
    value = leaf
    for _ in range(depth):
        value = [value] if kind == "list" else {"k": value}
    return value


deep = st.builds(
    nested,
    st.integers(min_value=100, max_value=20_000),
    st.one_of(st.none(), valid_text),
    st.sampled_from(["list", "dict"]),
)
"""Containers nested far deeper than any real message."""

json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        hostile_text,
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(hostile_text, inner, max_size=4)
    ),
    max_leaves=12,
)
wrong_types = st.one_of(
    st.floats(),  # nan and infinities too
    st.binary(max_size=10),
    st.tuples(st.integers()),
    st.frozensets(st.integers(), max_size=3),
    st.builds(object),
    deep,
)
anything = st.one_of(json_values, wrong_types)
"""Any value at all, for a field that wants a particular one."""

call_dicts = st.dictionaries(
    st.one_of(st.sampled_from(CALL_KEYS), st.sampled_from(CALL_KEYS), hostile_text),
    st.one_of(nonempty_text, hostile_text, anything),
    max_size=4,
)
near_valid_messages = st.fixed_dictionaries(
    {"role": st.one_of(st.sampled_from(ROLES), anything)},
    optional={
        "content": st.one_of(valid_text, hostile_text, anything),
        "tool_calls": st.one_of(
            st.lists(st.one_of(call_dicts, anything), max_size=3), st.none(), anything
        ),
        "tool_call_id": st.one_of(nonempty_text, st.none(), anything),
    },
)
"""Dicts shaped like messages, with any field broken in any way."""
message_dicts = st.one_of(
    near_valid_messages,
    st.dictionaries(
        st.one_of(st.sampled_from(MESSAGE_KEYS), hostile_text, st.integers()),
        anything,
        max_size=5,
    ),
)

arguments_text = st.one_of(
    valid_text,
    huge_text,
    json_values.map(json.dumps),
    st.dictionaries(valid_text, json_values, max_size=3).map(json.dumps),
    st.dictionaries(valid_text, json_values, max_size=3).map(lambda d: json.dumps(d)[:-1]),
    st.builds(lambda n: "[" * n + "]" * n, st.integers(min_value=1, max_value=500)),
)
"""Tool-call arguments as a model may write them: JSON or not, any size."""

tool_calls = st.lists(
    st.builds(ToolCall, id=nonempty_text, name=nonempty_text, arguments=arguments_text),
    min_size=1,
    max_size=3,
)
valid_messages = st.one_of(
    st.builds(Message, role=st.sampled_from(["system", "user"]), content=nonempty_text),
    st.builds(Message, role=st.just("user"), content=huge_text),
    st.builds(Message, role=st.just("assistant"), content=valid_text, tool_calls=tool_calls),
    st.builds(Message, role=st.just("assistant"), content=nonempty_text),
    st.builds(Message, role=st.just("tool"), content=nonempty_text, tool_call_id=nonempty_text),
)
"""Messages every store must keep exactly, however odd their text."""

HOSTILE_IDS = [
    "../../../../etc/passwd",
    "..",
    ".",
    "/",
    "/absolute/path",
    "a/../../b",
    "C:\\Windows\\system32",
    "con",
    "nul",
    ".hidden",
    "~",
    "'; DROP TABLE aniki_messages; --",
    '" OR "1"="1',
    "x' OR '1'='1",
    "%",
    "_",
    "*",
    "?",
    "[a-z]",
    "\\*",
    "{}",
    "}:info",
    "a}:msgs",
    "\n",
    "\r\n",
    "nul\x00byte",
    "\ud800",
    "",
    " ",
    "x" * 1024,
    "x" * 1025,
    "\U0001f600" * 300,
    "y" * 100_000,
]
"""Session ids that try to escape: paths, SQL, Redis globs and key syntax, NUL, length."""
session_ids = st.one_of(
    st.sampled_from(HOSTILE_IDS),
    hostile_text,
    st.lists(st.sampled_from(AWKWARD), min_size=1, max_size=12).map("".join),
)
