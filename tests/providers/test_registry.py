"""Provider names resolve to the built-in providers; a missing vendor package names its extra."""

from __future__ import annotations

import sys

import pytest

import aniki.providers
from aniki import UserError
from aniki.providers import available_providers, get_provider
from aniki.providers.anthropic import AnthropicProvider
from aniki.providers.openai import OpenAIProvider
from aniki.providers.openai_responses import OpenAIResponsesProvider


def test_builtin_names_resolve() -> None:
    assert {"openai", "openai-responses", "anthropic"} <= set(available_providers())
    assert isinstance(get_provider("openai"), OpenAIProvider)
    assert isinstance(get_provider("openai-responses"), OpenAIResponsesProvider)
    assert isinstance(get_provider("anthropic"), AnthropicProvider)
    assert aniki.providers.OpenAIProvider is OpenAIProvider
    assert aniki.providers.OpenAIResponsesProvider is OpenAIResponsesProvider
    assert aniki.providers.AnthropicProvider is AnthropicProvider


@pytest.mark.parametrize(
    ("name", "module", "attribute", "extra"),
    [
        ("openai", "openai", "OpenAIProvider", "openai"),
        ("openai-responses", "openai_responses", "OpenAIResponsesProvider", "openai"),
        ("anthropic", "anthropic", "AnthropicProvider", "anthropic"),
    ],
)
def test_a_missing_vendor_package_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, name: str, module: str, attribute: str, extra: str
) -> None:
    # As if the vendor package were not installed: importing it fails.
    monkeypatch.setitem(sys.modules, extra, None)
    monkeypatch.delitem(sys.modules, f"aniki.providers.{module}")
    monkeypatch.delitem(sys.modules, "aniki.providers._openai_base", raising=False)
    with pytest.raises(UserError, match=rf"pip install 'aniki-sdk\[{extra}\]'"):
        get_provider(name)
    with pytest.raises(UserError, match=rf"pip install 'aniki-sdk\[{extra}\]'"):
        getattr(aniki.providers, attribute)
