"""Model providers: the protocol, the name registry, and the built-in vendors.

``OpenAIProvider``, ``OpenAIResponsesProvider`` and ``AnthropicProvider`` are imported on
first access, so that the vendor packages are needed only when used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import ModelRequest, ModelResponse, ModelSettings, Provider, ToolDefinition
from .registry import available_providers, get_provider, register_provider

if TYPE_CHECKING:
    from .anthropic import AnthropicProvider
    from .openai import OpenAIProvider
    from .openai_responses import OpenAIResponsesProvider

__all__ = [
    "AnthropicProvider",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "OpenAIProvider",
    "OpenAIResponsesProvider",
    "Provider",
    "ToolDefinition",
    "available_providers",
    "get_provider",
    "register_provider",
]

_LAZY = {
    "OpenAIProvider": ("openai", "openai"),
    "OpenAIResponsesProvider": ("openai_responses", "openai"),
    "AnthropicProvider": ("anthropic", "anthropic"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module_name, extra = _LAZY[name]
        try:
            module = importlib.import_module(f"{__name__}.{module_name}")
        except ModuleNotFoundError as exc:
            from ..errors import UserError

            raise UserError(
                f"{name} needs the {exc.name!r} package: pip install 'aniki-sdk[{extra}]'"
            ) from exc
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
