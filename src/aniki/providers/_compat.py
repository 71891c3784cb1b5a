"""Server profiles for ``OpenAIProvider``: the request shape each OpenAI-compatible server
accepts, how to tell the servers apart, and which refusals mean "wrong shape" (pure, no I/O).

Every request is built in OpenAI's own shape first (:mod:`._openai_wire`); a profile then
rewrites the few fields its server reads differently:

=========================  =========  ================================  =======  ============
what                       openai     llama.cpp                         vllm     ollama
=========================  =========  ================================  =======  ============
tool-call message content  ``null``   ``""`` (``null`` is an HTTP 500)  ``null`` ``""``
output schema              json_schema ``json_object`` + ``schema``     same     same
text-only content parts    a list     one string (a list is an HTTP 500) a list  one string
tools without tool_choice  as is      ``tool_choice: "auto"``           as is    as is
non-object tool arguments  as is      as is                             as is    wrapped
a stream that sends nothing an error  sent again without streaming     an error an error
=========================  =========  ================================  =======  ============

The reasons, server by server, are in docs/providers.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from ..errors import UserError

__all__ = [
    "COMPAT_NAMES",
    "PROFILES",
    "Compat",
    "CompatSetting",
    "Profile",
    "adapt_params",
    "check_compat",
    "detect_from_models",
    "unsupported_shape",
]

Compat = Literal["openai", "llama.cpp", "vllm", "ollama"]
"""The servers a request can be shaped for."""
CompatSetting = Compat | Literal["auto"] | None
"""What ``OpenAIProvider(compat=...)`` takes: a server, or ``"auto"``/``None`` to ask it."""
COMPAT_NAMES: tuple[str, ...] = get_args(Compat)


@dataclass(frozen=True, slots=True)
class Profile:
    """What one server needs changed in a request built for OpenAI."""

    name: Compat
    """The server kind (``compat=`` value)."""
    empty_tool_call_content: bool = False
    """Send ``""`` instead of ``null`` as the text of an assistant message with tool calls."""
    schema_as_json_object: bool = False
    """Send an output schema as ``{"type": "json_object", "schema": ...}``."""
    join_text_parts: bool = False
    """Send content made only of text parts as one string."""
    explicit_auto_tool_choice: bool = False
    """Send ``tool_choice: "auto"`` with tools when no choice was set."""
    object_arguments: bool = False
    """Send stored tool-call arguments that are not a JSON object as
    ``{"raw_arguments": "<text>"}`` (the server parses them and refuses anything else)."""
    resend_empty_stream: bool = False
    """A stream that ends before its first chunk is made again without streaming, so that the
    server's own answer (its error, or the reply) is what the call returns."""


PROFILES: dict[Compat, Profile] = {
    "openai": Profile("openai"),
    # llama-cpp-python's server (and llama.cpp's llama-server, which takes the same shapes).
    "llama.cpp": Profile(
        "llama.cpp",
        empty_tool_call_content=True,
        schema_as_json_object=True,
        join_text_parts=True,
        explicit_auto_tool_choice=True,
        resend_empty_stream=True,
    ),
    # vLLM takes OpenAI's whole request shape, json_schema included.
    "vllm": Profile("vllm"),
    # Ollama turns each text part into a message of its own, and parses tool-call arguments.
    "ollama": Profile(
        "ollama", empty_tool_call_content=True, join_text_parts=True, object_arguments=True
    ),
}


def check_compat(value: Any) -> CompatSetting:
    """``value`` if ``compat=`` may be it, else a :class:`UserError` listing the choices."""
    if value is None or value == "auto" or value in COMPAT_NAMES:
        return value  # type: ignore[no-any-return]
    choices = ", ".join(repr(name) for name in (*COMPAT_NAMES, "auto"))
    raise UserError(f"compat must be one of {choices} or None, got {value!r}")


def _joined(content: Any) -> Any:
    if not isinstance(content, list) or not content:
        return content
    if not all(isinstance(part, Mapping) and part.get("type") == "text" for part in content):
        return content  # images and files keep their parts
    return "\n\n".join(str(part.get("text", "")) for part in content)


def _object_arguments(arguments: Any) -> Any:
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        return arguments
    return json.dumps({"raw_arguments": arguments}, ensure_ascii=False)


def _message(message: dict[str, Any], profile: Profile) -> dict[str, Any]:
    message = dict(message)
    if profile.join_text_parts and "content" in message:
        message["content"] = _joined(message["content"])
    calls = message.get("tool_calls")
    if calls and profile.empty_tool_call_content and message.get("content") is None:
        message["content"] = ""
    if calls and profile.object_arguments:
        message["tool_calls"] = [
            {**call, "function": {**call["function"], "arguments": _object_arguments(
                call["function"].get("arguments"))}}
            for call in calls
        ]  # fmt: skip
    return message


def adapt_params(params: dict[str, Any], profile: Profile) -> dict[str, Any]:
    """``params`` (built for OpenAI) as ``profile``'s server takes them; a new dict."""
    if profile.name == "openai" or profile == PROFILES["openai"]:
        return params
    adapted = dict(params)
    adapted["messages"] = [_message(message, profile) for message in params["messages"]]
    response_format = params.get("response_format")
    if profile.schema_as_json_object and isinstance(response_format, Mapping):
        schema = response_format.get("json_schema", {}).get("schema")
        if response_format.get("type") == "json_schema" and schema is not None:
            adapted["response_format"] = {"type": "json_object", "schema": schema}
    if profile.explicit_auto_tool_choice and params.get("tools") and "tool_choice" not in params:
        adapted["tool_choice"] = "auto"
    return adapted


# What each server's GET /v1/models says in ``owned_by``: llama-cpp-python "me", llama.cpp's
# llama-server "llamacpp", vLLM "vllm", Ollama the model's namespace ("library" for its own).
_OWNERS: dict[str, Compat] = {
    "me": "llama.cpp",
    "llamacpp": "llama.cpp",
    "llama.cpp": "llama.cpp",
    "vllm": "vllm",
    "library": "ollama",
    "ollama": "ollama",
}


def detect_from_models(body: Any) -> Compat | None:
    """The server kind a ``GET /v1/models`` answer shows, or ``None`` when it shows none."""
    data = body.get("data") if isinstance(body, Mapping) else None
    if not isinstance(data, list):
        return None
    for model in data:
        owner = model.get("owned_by") if isinstance(model, Mapping) else None
        if isinstance(owner, str) and owner.lower() in _OWNERS:
            return _OWNERS[owner.lower()]
    return None


# Refusals that say the request's shape is not one the server takes: it answers the same
# request the same way every time, so retrying it is pointless. FastAPI-style validation
# errors about the body (llama-cpp-python answers them with HTTP 500), and a server that
# failed on a list of content parts where it expected a string.
# Compiled on first use: ``import aniki`` should not pay for them.
_VALIDATION = r"validation errors?\b.*?\(?'body',\s*'([a-z_]+)'"
_LIST_CONTENT = r"concatenate str \(not \"list\"\)|expected str(?:ing)?,? got list"


def _text(body: Any) -> str:
    if isinstance(body, str):
        return body
    try:
        return json.dumps(body, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(body)


def unsupported_shape(body: Any) -> str | None:
    """What part of the request an error body says the server does not take, else ``None``."""
    if body is None:
        return None
    text = _text(body).replace("\\'", "'").replace('\\"', '"')
    if re.search(_LIST_CONTENT, text):
        return "message content as a list of parts"
    found = re.search(_VALIDATION, text, re.DOTALL)
    if found is None:
        return None
    field = found.group(1)
    if field == "response_format":
        kind = "json_schema" if "json_schema" in text else "this type"
        return f"response_format of {kind}"
    if field == "messages":
        return "the messages' shape (content null or a list beside tool calls)"
    return f"the field {field!r} as sent"
