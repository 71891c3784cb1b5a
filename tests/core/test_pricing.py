"""aniki.pricing: bills of reported usage, predicted requests under the cache rules, and lookups.

Every expected figure is worked out by hand in the test, from the published prices in
dollars per million tokens.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import aniki
from aniki import Usage, UserError
from aniki.pricing import ANTHROPIC, OPENAI, CacheRules, PriceList, Prices, prices_for

MINI = OPENAI.prices("gpt-4o-mini")  # 0.15 in, 0.075 cached, 0.60 out
SONNET = ANTHROPIC.prices("claude-sonnet-4-5")  # 3 in, 0.30 read, 3.75 write, 15 out


def test_a_reported_usage_is_billed_part_by_part() -> None:
    usage = Usage(input_tokens=12_000, output_tokens=800, requests=3, cache_read_tokens=9_000)
    # 3,000 uncached x 0.15 = 450; 9,000 cached x 0.075 = 675; 800 out x 0.60 = 480
    assert MINI.cost(usage) == pytest.approx((450 + 675 + 480) / 1e6)  # $0.001605


def test_anthropic_cache_writes_are_billed_at_the_write_price() -> None:
    usage = Usage(
        input_tokens=10_000,
        output_tokens=500,
        requests=1,
        cache_read_tokens=6_000,
        cache_write_tokens=3_000,
    )
    # 1,000 uncached x 3 = 3,000; 6,000 read x 0.30 = 1,800; 3,000 written x 3.75 = 11,250;
    # 500 out x 15 = 7,500
    assert SONNET.cost(usage) == pytest.approx((3_000 + 1_800 + 11_250 + 7_500) / 1e6)


def test_requests_without_token_counts_add_nothing_so_the_bill_is_a_lower_bound() -> None:
    usage = Usage(input_tokens=100, output_tokens=10, requests=2, unreported_requests=1)
    # 100 x 0.15 + 10 x 0.60 = 21
    assert MINI.cost(usage) == pytest.approx(21 / 1e6)


def test_input_equivalents_put_two_models_bills_on_one_scale() -> None:
    usage = Usage(input_tokens=12_000, output_tokens=800, requests=3, cache_read_tokens=9_000)
    # $0.001605 / $0.15 per million = 10,700 input tokens' worth
    assert MINI.input_equivalents(usage) == pytest.approx(10_700)
    usage = Usage(
        input_tokens=10_000, output_tokens=500, cache_read_tokens=6_000, cache_write_tokens=3_000
    )
    # $0.02355 / $3 per million = 7,850
    assert SONNET.input_equivalents(usage) == pytest.approx(7_850)


def test_openai_counts_a_cached_prefix_from_1024_tokens_in_steps_of_128() -> None:
    # 1,100 cached: 8 x 128 = 1,024 count. 476 x 0.15 + 1,024 x 0.075 = 71.4 + 76.8
    assert MINI.request(1_500, 1_100) == pytest.approx(148.2 / 1e6)
    # 1,000 cached is under the minimum: all 1,500 at 0.15 = 225
    assert MINI.request(1_500, 1_000) == pytest.approx(225 / 1e6)
    # exactly the minimum counts whole: 476 x 0.15 + 1,024 x 0.075 = 71.4 + 76.8
    assert MINI.request(1_500, 1_024) == pytest.approx(148.2 / 1e6)
    # 1,500 cached: 11 x 128 = 1,408 count. 92 x 0.15 + 1,408 x 0.075 = 13.8 + 105.6
    assert MINI.request(1_500, 1_500) == pytest.approx(119.4 / 1e6)
    # nothing cached at all
    assert MINI.request(2_000, 0) == pytest.approx(300 / 1e6)


def test_anthropic_counts_every_cached_token_and_bills_writes() -> None:
    # 500 x 3 = 1,500 uncached; 1,500 read x 0.30 = 450
    assert SONNET.request(2_000, 1_500) == pytest.approx(1_950 / 1e6)
    # 500 x 3 = 1,500; 3,000 read x 0.30 = 900; 1,500 written x 3.75 = 5,625
    assert SONNET.request(5_000, 3_000, written=1_500) == pytest.approx(8_025 / 1e6)


def test_anthropic_minimums_are_per_model() -> None:
    haiku = prices_for("claude-haiku-4-5")  # 1 in, 0.10 read, 1.25 write; at least 4,096
    assert haiku.minimum == 4_096 and SONNET.minimum == 1_024
    # 3,000 cached and 500 more written make a 3,500-token prefix, under 4,096: neither
    # read nor written, so all 5,000 at 1.00
    assert haiku.request(5_000, 3_000, written=500) == pytest.approx(5_000 / 1e6)
    # a 4,500-token prefix written: 500 x 1.00 + 4,500 x 1.25 = 500 + 5,625
    assert haiku.request(5_000, 0, written=4_500) == pytest.approx(6_125 / 1e6)


def test_the_published_rules() -> None:
    assert (OPENAI.rules.minimum, OPENAI.rules.step, OPENAI.rules.write) == (1024, 128, 1.0)
    assert OPENAI.rules.breakpoints is None and OPENAI.rules.write_1h is None
    rules = ANTHROPIC.rules
    assert (rules.read, rules.write, rules.write_1h, rules.breakpoints) == (0.1, 1.25, 2.0, 4)
    assert OPENAI.rules.ttl_seconds == rules.ttl_seconds == 300
    for price_list in (OPENAI, ANTHROPIC):
        assert price_list.rules.checked == "2026-12-07"
        assert price_list.rules.source.startswith("https://")
        assert all(p.rules is price_list.rules for p in price_list.models.values())


def test_anthropic_cache_prices_follow_its_multipliers() -> None:
    # The table writes each figure out; they must be 0.1x and 1.25x of the input price.
    for prices in ANTHROPIC.models.values():
        assert prices.cache_read == pytest.approx(0.1 * prices.input), prices.model
        assert prices.cache_write == pytest.approx(1.25 * prices.input), prices.model


def test_openai_figures_as_published() -> None:
    table = {name: (p.input, p.cache_read, p.output) for name, p in OPENAI.models.items()}
    assert table["gpt-4o"] == (2.50, 1.25, 10.00)
    assert table["gpt-5-nano"] == (0.05, 0.005, 0.40)
    assert table["o4-mini"] == (1.10, 0.275, 4.40)
    assert len(table) == 10
    assert all(p.cache_write == p.input for p in OPENAI.models.values())  # no write premium


@pytest.mark.parametrize(
    ("model", "found"),
    [
        ("gpt-4o-mini", "gpt-4o-mini"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4.1-nano-2025-04-14", "gpt-4.1-nano"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
    ],
)
def test_prices_for_finds_a_model_and_its_dated_releases(model: str, found: str) -> None:
    assert prices_for(model).model == found


@pytest.mark.parametrize("model", ["o3-pro", "gpt-4o-audio-preview", "llama-3.1-8b", ""])
def test_an_unknown_model_names_the_known_ones(model: str) -> None:
    # o3-pro is not billed like o3: a variant is refused rather than priced as its base.
    with pytest.raises(UserError, match="no prices for model") as caught:
        prices_for(model)
    message = str(caught.value)
    assert repr(model) in message
    assert "gpt-4o-mini" in message and "claude-sonnet-4-5" in message
    with pytest.raises(UserError, match=r"OpenAI's price list has no prices"):
        OPENAI.prices("claude-sonnet-4-5")


def test_a_price_list_of_your_own() -> None:
    rules = CacheRules(read=0.5, minimum=1_000, step=100)
    mine = PriceList(
        "local",
        rules,
        {
            "my-model": Prices(
                "my-model",
                input=2.0,
                output=6.0,
                cache_read=1.0,
                cache_write=2.0,
                minimum=1_000,
                rules=rules,
            )
        },
    )
    assert mine.names() == ("my-model",)
    # 1,250 cached counts 1,200: 800 x 2 + 1,200 x 1 = 2,800
    assert mine.prices("my-model-20260101").request(2_000, 1_250) == pytest.approx(2_800 / 1e6)
    with pytest.raises(TypeError):
        mine.models["other"] = OPENAI.prices("gpt-5")  # type: ignore[index]


@pytest.mark.parametrize(
    ("call", "says"),
    [
        (lambda: MINI.request(-1, 0), r"request\(\) sent must be a count"),
        (lambda: MINI.request(100, 200), r"cached_prefix \(200\) plus written \(0\) is more"),
        (lambda: SONNET.request(100, 60, written=50), r"plus written \(50\) is more than sent"),
        (lambda: MINI.request(100, 0, written=1.5), r"written must be a count"),
        (
            lambda: MINI.cost(Usage(input_tokens=10, cache_read_tokens=20)),
            "cache tokens are parts of input_tokens",
        ),
        (lambda: MINI.cost(Usage(input_tokens=-5)), "usage input_tokens must be a count"),
        (lambda: MINI.cost({"input_tokens": 1}), r"cost\(\) takes an aniki.Usage, got dict"),
        (
            lambda: Prices(
                "m", input=-1, output=1, cache_read=0, cache_write=0, minimum=0, rules=OPENAI.rules
            ),
            "Prices input for m must be dollars per million tokens",
        ),
        (lambda: CacheRules(read=0.1, step=0), "CacheRules step must be 1 or more"),
        (lambda: CacheRules(read=-0.1), "CacheRules read must be a multiple of 0 or more"),
        (
            lambda: PriceList("x", OPENAI.rules, {"gpt-5": MINI}),
            "entry 'gpt-5' must be the Prices of model 'gpt-5'",
        ),
        (lambda: prices_for(None), "name a model as a string"),  # type: ignore[arg-type]
    ],
)
def test_bad_input_says_what_to_fix(call: object, says: str) -> None:
    with pytest.raises(UserError, match=says):
        call()  # type: ignore[operator]


def test_a_free_model_has_no_input_equivalent() -> None:
    free = Prices(
        "free", input=0, output=0, cache_read=0, cache_write=0, minimum=0, rules=OPENAI.rules
    )
    assert free.cost(Usage(input_tokens=1_000, output_tokens=10)) == 0
    with pytest.raises(UserError, match="input price of 0"):
        free.input_equivalents(Usage(input_tokens=1_000))


def test_the_module_is_not_in_the_facade_and_imports_no_heavy_package() -> None:
    assert not hasattr(aniki, "prices_for") and "pricing" not in aniki.__all__
    code = (
        "import sys, aniki.pricing; "
        "print(sorted({'pydantic', 'openai', 'anthropic', 'httpx'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_tables_in_the_docs_are_the_modules_figures() -> None:
    page = Path(__file__).resolve().parents[2] / "docs" / "pricing.md"
    rows = re.findall(r"^\| `([\w.-]+)` \|(.*)\|$", page.read_text(encoding="utf-8"), re.M)
    documented = {name: [float(c.replace(",", "")) for c in row.split("|")] for name, row in rows}
    expected = {name: [p.input, p.cache_read, p.output] for name, p in OPENAI.models.items()}
    for name, p in ANTHROPIC.models.items():
        expected[name] = [p.input, p.cache_read, p.cache_write, p.output, float(p.minimum)]
    assert documented == expected
