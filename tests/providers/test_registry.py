"""Provider names resolve to the built-in providers; a missing vendor package names its extra."""

from __future__ import annotations

import sys

import pytest

import aniki.providers
from aniki import UserError
from aniki.providers import available_providers, get_provider
from aniki.providers.anthropic import AnthropicProvider
from aniki.providers.openai import OpenAIProvider


def test_builtin_names_resolve() -> None:
    assert {"openai", "anthropic"} <= set(available_providers())
    assert isinstance(get_provider("openai"), OpenAIProvider)
    assert isinstance(get_provider("anthropic"), AnthropicProvider)
    assert aniki.providers.OpenAIProvider is OpenAIProvider
    assert aniki.providers.AnthropicProvider is AnthropicProvider


@pytest.mark.parametrize(
    ("name", "attribute"), [("openai", "OpenAIProvider"), ("anthropic", "AnthropicProvider")]
)
def test_a_missing_vendor_package_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, name: str, attribute: str
) -> None:
    # As if the vendor package were not installed: importing it fails.
    monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, f"aniki.providers.{name}")
    with pytest.raises(UserError, match=rf"pip install 'aniki-sdk\[{name}\]'"):
        get_provider(name)
    with pytest.raises(UserError, match=rf"pip install 'aniki-sdk\[{name}\]'"):
        getattr(aniki.providers, attribute)
