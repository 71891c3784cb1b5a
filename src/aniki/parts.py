"""What a message carries besides its text: attachments (images, documents, audio) on user
and tool messages, and a model's reasoning on assistant messages."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias
from urllib.parse import quote

from ._checks import check_mapping, check_text, shown
from .errors import ValidationError

__all__ = ["MAX_ATTACHMENT_BYTES", "MEDIA_TYPES", "Attachment", "AttachmentKind", "Reasoning"]


AttachmentKind: TypeAlias = Literal["image", "document", "audio"]

MEDIA_TYPES: Mapping[str, AttachmentKind] = {
    "image/png": "image",
    "image/jpeg": "image",
    "image/gif": "image",
    "image/webp": "image",
    "application/pdf": "document",
    "text/plain": "document",
    "audio/wav": "audio",
    "audio/mpeg": "audio",
}
"""The media types an :class:`Attachment` may have, each with its kind: those that the
OpenAI and Anthropic APIs take in a message (a provider refuses the kinds its API lacks)."""

MAX_ATTACHMENT_BYTES = 20 * 1024 * 1024
"""The largest inline attachment: 20 MiB, the most OpenAI takes per image (Anthropic caps a
whole request at 32 MB). Larger files go by ``url=``."""

# C0 controls, DEL and C1 controls: a URL holding one (a newline that splits a request line,
# a NUL that ends a C string, an escape a terminal obeys) is not the address it looks like.
_URL_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")

_ATTACHMENT_KEYS = frozenset({"media_type", "data", "url", "name"})
_REASONING_KEYS = frozenset({"text", "signature", "redacted", "provider"})


@dataclass(frozen=True, slots=True)
class Attachment:
    """An image, document or audio clip sent with a user or tool message: inline bytes, or a
    URL the provider fetches.

    Example::

        Attachment("image/png", data=Path("chart.png").read_bytes(), name="chart.png")
        Attachment("application/pdf", url="https://example.com/report.pdf")
    """

    media_type: str
    """The IANA media type, one of :data:`MEDIA_TYPES` (``"image/png"``, ...)."""
    data: bytes | None = field(default=None, kw_only=True)
    """The content itself, at most :data:`MAX_ATTACHMENT_BYTES`; or ``None`` with ``url``."""
    url: str | None = field(default=None, kw_only=True)
    """Where the provider fetches it (``http://`` or ``https://``); or ``None`` with ``data``."""
    name: str | None = field(default=None, kw_only=True)
    """A file name to show (and, for documents, to give the model); optional."""

    def __post_init__(self) -> None:
        kind = MEDIA_TYPES.get(self.media_type) if isinstance(self.media_type, str) else None
        if kind is None:
            raise ValidationError(
                f"attachment media_type must be one of {sorted(MEDIA_TYPES)}, got "
                f"{shown(self.media_type)}",
                field="attachments.media_type",
            )
        if (self.data is None) == (self.url is None):
            raise ValidationError(
                "an attachment needs exactly one of data= (its bytes) or url= (where it is)",
                field="attachments.data",
            )
        if self.data is not None:
            data = self.data
            if isinstance(data, (bytearray, memoryview)):
                data = bytes(data)
                object.__setattr__(self, "data", data)
            if not isinstance(data, bytes):
                raise ValidationError(
                    f"attachment data must be bytes, got {type(data).__name__} (for base64 "
                    "text, use Attachment.from_dict or base64.b64decode)",
                    field="attachments.data",
                )
            if not data:
                raise ValidationError("attachment data is empty", field="attachments.data")
            if len(data) > MAX_ATTACHMENT_BYTES:
                raise ValidationError(
                    f"attachment data is {len(data):,} bytes, over the limit of "
                    f"{MAX_ATTACHMENT_BYTES:,}; send a file this large by url=",
                    field="attachments.data",
                )
        if self.url is not None:
            url = check_text(self.url, "attachment url", field="attachments.url")
            control = _URL_CONTROL.search(url)
            if control is not None:
                char = control.group()
                raise ValidationError(
                    f"attachment url holds a control character (U+{ord(char):04X}) at index "
                    f"{control.start()}; percent-encode it ({quote(char)}) or remove it",
                    field="attachments.url",
                )
            if not url.startswith(("http://", "https://")) or len(url) <= len("https://"):
                raise ValidationError(
                    f"attachment url must be an http:// or https:// URL, got {shown(url)}",
                    field="attachments.url",
                )
        if self.name is not None and not check_text(
            self.name, "attachment name", field="attachments.name"
        ):
            raise ValidationError("attachment name must not be empty", field="attachments.name")

    @property
    def kind(self) -> AttachmentKind:
        """``"image"``, ``"document"`` or ``"audio"``, from the media type."""
        return MEDIA_TYPES[self.media_type]

    def __repr__(self) -> str:
        where = f"data=<{len(self.data):,} bytes>" if self.data is not None else f"url={self.url!r}"
        name = f", name={self.name!r}" if self.name is not None else ""
        return f"Attachment({self.media_type!r}, {where}{name})"

    def to_dict(self) -> dict[str, str]:
        """JSON-safe: ``{"media_type", "data" (base64) or "url", "name" (when set)}``."""
        data: dict[str, str] = {"media_type": self.media_type}
        if self.data is not None:
            data["data"] = base64.b64encode(self.data).decode("ascii")
        else:
            assert self.url is not None
            data["url"] = self.url
        if self.name is not None:
            data["name"] = self.name
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Attachment:
        """Build an attachment from :meth:`to_dict`'s mapping (``data`` as base64 text)."""
        check_mapping(data, "an attachment", _ATTACHMENT_KEYS, field="attachments")
        if "media_type" not in data:
            raise ValidationError("an attachment needs a media_type", field="attachments")
        encoded = data.get("data")
        raw: bytes | None = None
        if encoded is not None:
            if not isinstance(encoded, str):
                raise ValidationError(
                    f"attachment data must be base64 text here, got {type(encoded).__name__}",
                    field="attachments.data",
                )
            try:
                raw = base64.b64decode(encoded, validate=True)
            except (binascii.Error, ValueError):
                raise ValidationError(
                    "attachment data is not valid base64 text", field="attachments.data"
                ) from None
        return cls(data["media_type"], data=raw, url=data.get("url"), name=data.get("name"))


@dataclass(frozen=True, slots=True)
class Reasoning:
    """A model's thinking, kept verbatim on the assistant message that followed it, so that it
    can be sent back where an API requires it (Anthropic's extended thinking, with its
    signature, on the turn after a tool call; the OpenAI Responses API's encrypted reasoning
    items, which a stateless request must carry itself).

    Each provider sends back only the reasoning its own API wrote (see :attr:`provider`): one
    vendor's thinking means nothing to another, and its API would refuse it.

    Example::

        Reasoning("The user wants the total, so add first.", signature="EqQBCkgIARABGAIi...")
        Reasoning(redacted="EmwKAhgBEgy3va3pzix/LafPsn4a...")  # encrypted by the provider
        Reasoning("Add first.", signature="rs_68af...", redacted="gAAAAB...",
                  provider="openai-responses")
    """

    text: str = ""
    """The thinking as the model wrote it (empty when only ``redacted`` is given). For the
    OpenAI Responses API, one part of the reasoning item's summary."""
    signature: str | None = field(default=None, kw_only=True)
    """The provider's signature over ``text``, which it checks when the thinking comes back.
    For the OpenAI Responses API it is the reasoning item's id (``rs_...``)."""
    redacted: str | None = field(default=None, kw_only=True)
    """Thinking the provider sent encrypted (an opaque payload, returned as it came). For the
    OpenAI Responses API it is the reasoning item's ``encrypted_content``."""
    provider: str | None = field(default=None, kw_only=True)
    """The registered name of the provider whose model wrote it (``"anthropic"``,
    ``"openai"``, ``"openai-responses"``); each provider sends back only its own. ``None``
    for reasoning stored before aniki recorded it, or written by hand."""

    def __post_init__(self) -> None:
        check_text(self.text, "reasoning text", field="reasoning.text")
        for name in ("signature", "redacted", "provider"):
            value = getattr(self, name)
            if value is not None:
                check_text(value, f"reasoning {name}", field=f"reasoning.{name}")
        if self.provider == "":
            raise ValidationError(
                "reasoning provider must be a provider's name, or None when unknown",
                field="reasoning.provider",
            )
        if not self.text and not self.redacted and not self.signature:
            raise ValidationError(
                "reasoning needs text, a signature or a redacted payload", field="reasoning.text"
            )

    def to_dict(self) -> dict[str, str]:
        """JSON-safe: ``{"text", "signature", "redacted" and "provider" when set}``."""
        data = {"text": self.text}
        if self.signature is not None:
            data["signature"] = self.signature
        if self.redacted is not None:
            data["redacted"] = self.redacted
        if self.provider is not None:
            data["provider"] = self.provider
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Reasoning:
        """Build reasoning from :meth:`to_dict`'s mapping."""
        check_mapping(data, "reasoning", _REASONING_KEYS, field="reasoning")
        return cls(
            data.get("text", ""),
            signature=data.get("signature"),
            redacted=data.get("redacted"),
            provider=data.get("provider"),
        )
