"""Provider names: ``Agent(provider="openai")`` resolves through this registry."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from ..errors import UserError
from .base import Provider

__all__ = ["available_providers", "get_provider", "register_provider"]

ProviderFactory = Callable[[], Provider]

# name -> ("module:attribute", extra to install). Imported on first use so that
# `import aniki` never pays for a vendor client.
_BUILTIN: dict[str, tuple[str, str]] = {
    "openai": ("aniki.providers.openai:OpenAIProvider", "openai"),
    "openai-responses": ("aniki.providers.openai_responses:OpenAIResponsesProvider", "openai"),
    "anthropic": ("aniki.providers.anthropic:AnthropicProvider", "anthropic"),
}
_FACTORIES: dict[str, ProviderFactory] = {}


def register_provider(name: str, factory: ProviderFactory) -> None:
    """Make ``Agent(provider=name)`` build its provider with ``factory()``.

    Example::

        register_provider("local", lambda: OpenAIProvider(base_url="http://127.0.0.1:8000/v1"))
    """
    if not name or not isinstance(name, str):
        raise UserError("a provider name must be a non-empty string")
    _FACTORIES[name] = factory


def available_providers() -> list[str]:
    """Every registered name, built-in ones included."""
    return sorted({*_BUILTIN, *_FACTORIES})


def get_provider(name: str) -> Provider:
    """Build the provider registered under ``name``.

    Raises:
        UserError: the name is unknown, or its vendor package is not installed (the
            message gives the install command).
    """
    factory = _FACTORIES.get(name)
    if factory is not None:
        return factory()
    if name not in _BUILTIN:
        raise UserError(
            f"unknown provider {name!r}; use one of {available_providers()}, pass a Provider "
            "object, or register one with aniki.providers.register_provider()"
        )
    target, extra = _BUILTIN[name]
    module_name, _, attribute = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or module_name
        raise UserError(
            f"provider {name!r} needs the {missing!r} package, which is not installed: "
            f"pip install 'aniki-sdk[{extra}]'"
        ) from exc
    provider_class: Callable[[], Provider] = getattr(module, attribute)
    return provider_class()
