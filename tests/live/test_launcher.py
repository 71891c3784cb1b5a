"""The live tier's plumbing, without a server: the log parser, the set-up's verdicts and
the build's progress reports."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from .helpers import PromptEval, live_server

# Trimmed from a real llama-cpp-python 0.3.36 server log: a first request (nothing cached),
# a non-streamed one that found 28 tokens cached, and a stream whose timing lines come after
# the access log line.
LOG = """\
llama_model_loader: - kv   0:                       general.architecture str              = llama
INFO:     Uvicorn running on http://127.0.0.1:18777 (Press CTRL+C to quit)
INFO:     127.0.0.1:41690 - "GET /v1/models HTTP/1.1" 200 OK
llama_perf_context_print:        load time =       0.28 ms
llama_perf_context_print: prompt eval time =       0.05 ms /    28 tokens (    0.00 ms per token, 595744.68 tokens per second)
llama_perf_context_print:        eval time =     184.14 ms /    15 runs   (   12.28 ms per token,    81.46 tokens per second)
llama_perf_context_print:       total time =     338.41 ms /    43 tokens
INFO:     127.0.0.1:41702 - "POST /v1/chat/completions HTTP/1.1" 200 OK
Llama.generate: 28 prefix-match hit, remaining 18 prompt tokens to eval
llama_perf_context_print:        load time =       0.28 ms
llama_perf_context_print: prompt eval time =      81.34 ms /    18 tokens (    4.52 ms per token,   221.29 tokens per second)
llama_perf_context_print:        eval time =      24.88 ms /     2 runs   (   12.44 ms per token,    80.38 tokens per second)
INFO:     127.0.0.1:41714 - "POST /v1/chat/completions HTTP/1.1" 200 OK
INFO:     127.0.0.1:41716 - "POST /v1/chat/completions HTTP/1.1" 200 OK
Llama.generate: 45 prefix-match hit, remaining 1 prompt tokens to eval
llama_perf_context_print:        load time =       0.28 ms
llama_perf_context_print: prompt eval time =       0.00 ms /     1 tokens (    0.00 ms per token,      inf tokens per second)
llama_perf_context_print:        eval time =      36.55 ms /     3 runs   (   12.18 ms per token,    82.08 tokens per second)
"""  # noqa: E501


def test_parser_reads_one_record_per_request() -> None:
    assert live_server.parse_prompt_evals(LOG) == [
        PromptEval(reused_tokens=0, evaluated_tokens=28),
        PromptEval(reused_tokens=28, evaluated_tokens=18),
        PromptEval(reused_tokens=45, evaluated_tokens=1),
    ]
    assert [e.prompt_tokens for e in live_server.parse_prompt_evals(LOG)] == [28, 46, 46]


def test_parser_prefers_the_prefix_line_to_the_timing_floor() -> None:
    # llama.cpp reports at least 1 prompt token even when it evaluated none.
    log = (
        "Llama.generate: full prompt already cached, skipping reset\n"
        "llama_perf_context_print: prompt eval time =       0.00 ms /     1 tokens\n"
    )
    [record] = live_server.parse_prompt_evals(log)
    assert record == PromptEval(reused_tokens=None, evaluated_tokens=0)
    assert record.prompt_tokens is None


def test_parser_counts_a_prefix_it_could_not_reuse_as_evaluated() -> None:
    log = (
        "Llama.generate: 30 prefix-match found but partial kv removal not supported, "
        "re-evaluating full prompt\n"
        "llama_perf_context_print: prompt eval time =      90.00 ms /    50 tokens\n"
    )
    assert live_server.parse_prompt_evals(log) == [PromptEval(0, 50)]


def test_parser_ignores_a_prefix_line_without_timing_and_partial_logs() -> None:
    assert live_server.parse_prompt_evals("") == []
    assert live_server.parse_prompt_evals(LOG.split("INFO:     127.0.0.1:41716")[0])[-1] == (
        PromptEval(28, 18)
    )


@pytest.fixture
def live_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ANIKI_LIVE_HOME", str(tmp_path))
    monkeypatch.delenv("ANIKI_LIVE", raising=False)
    monkeypatch.delenv("CI", raising=False)
    return tmp_path


def test_a_missing_installation_says_how_to_set_it_up(live_home: Path) -> None:
    with pytest.raises(live_server.LiveUnavailable, match=r"scripts/live_server\.py setup"):
        live_server.find_runtime()


def test_turned_off_is_a_skip_reason_and_a_failure_under_ci(
    live_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANIKI_LIVE", "0")
    with pytest.raises(live_server.LiveUnavailable, match="ANIKI_LIVE=0"):
        live_server.find_runtime()
    assert live_server.setup() == 0
    monkeypatch.setenv("CI", "true")
    assert live_server.setup() == 1


def test_a_build_without_compilers_skips_the_tier_but_fails_ci(
    live_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(live_server.shutil, "which", lambda name: None)

    assert live_server.setup() == 0
    assert "will skip" in capsys.readouterr().err
    with pytest.raises(live_server.LiveUnavailable, match="compiler"):
        live_server.find_runtime()

    monkeypatch.setenv("CI", "true")
    assert live_server.setup() == 1
    assert not (live_home / "live" / "venv").exists()


def test_wait_ready_ends_with_the_log_when_the_server_dies(tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'error: no such model' >&2\nexit 3\n")
    fake.chmod(0o755)
    runtime = live_server.Runtime(python=fake, model=tmp_path / "model.gguf")
    with (
        pytest.raises(live_server.LiveServerError, match=r"status 3(.|\n)*no such model"),
        live_server.LlamaServer.start(tmp_path / "server.log", runtime=runtime, timeout=10),
    ):
        pass


def test_a_failed_build_is_not_retried_on_every_run_outside_ci(
    live_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builds: list[str] = []

    def run(cmd, log, *, timeout, what, report=None):  # type: ignore[no-untyped-def]
        if "wheel" in map(str, cmd):
            builds.append(what)
            log.write("CMake Error: something went wrong\n")
            raise live_server._SetupFailed(f"{what} failed (exit 1)")

    monkeypatch.setattr(live_server, "_run", run)

    assert live_server.setup() == 0
    assert len(builds) == 1
    with pytest.raises(live_server.LiveUnavailable, match=r"failed \(exit 1\)"):
        live_server.find_runtime()
    kept = live_home / "live" / "build-failed.log"
    assert "CMake Error" in kept.read_text()

    assert live_server.setup() == 0  # fails at once, naming the marker to delete
    assert len(builds) == 1
    with pytest.raises(live_server.LiveUnavailable, match="try the build again"):
        live_server.find_runtime()

    monkeypatch.setenv("CI", "true")  # CI always tries, and fails when the build does
    assert live_server.setup() == 1
    assert len(builds) == 2


BUILD = """\
import pathlib, sys, time
print("Building wheel for llama-cpp-python (pyproject.toml)", flush=True)
print("[1/4] Building C object vendor/ggml.c.o", flush=True)
print("[2/4] Building CXX object vendor/llama.cpp.o", flush=True)
deadline = time.monotonic() + 60
while not pathlib.Path(sys.argv[1]).exists() and time.monotonic() < deadline:
    time.sleep(0.02)
print("[4/4] Linking CXX shared library libllama.so", flush=True)
sys.exit(int(sys.argv[2]))
"""


def test_a_long_build_says_how_far_it_got(tmp_path: Path) -> None:
    """The build (ten minutes on two cores) reports its step every so often, read from
    the compiler's progress lines, and its whole output still reaches the log."""
    import sys

    script, seen = tmp_path / "build.py", tmp_path / "seen"
    script.write_text(BUILD)
    reports: list[str] = []

    def report(text: str) -> None:
        reports.append(text)
        if "step 2 of 4" in text:
            seen.touch()  # the build goes on only once its progress was reported

    with open(tmp_path / "setup.log", "w") as log:
        live_server._logs.run_reporting(
            [sys.executable, str(script), str(seen), "0"],
            log=log,
            env=dict(os.environ),
            timeout=120,
            report=report,
            every=0.05,
        )
    assert any(re.fullmatch(r"\d+ min \d\d s so far, compiling: step 2 of 4 \(50%\)", r)
               for r in reports), reports  # fmt: skip
    logged = (tmp_path / "setup.log").read_text()
    assert "[2/4] Building CXX" in logged and "[4/4] Linking" in logged


def test_a_reported_build_that_fails_or_overruns_is_a_setup_failure(tmp_path: Path) -> None:
    import sys

    script, seen = tmp_path / "build.py", tmp_path / "seen"
    script.write_text(BUILD)
    seen.touch()
    with open(tmp_path / "setup.log", "w") as log:
        with pytest.raises(live_server._SetupFailed, match=r"building x failed \(exit 3\)"):
            live_server._run(
                [sys.executable, script, seen, "3"], log, timeout=120, what="building x",
                report=lambda text: None,
            )  # fmt: skip
        seen.unlink()  # now it waits (at most a minute) for what never comes
        with pytest.raises(live_server._SetupFailed, match="building x took more than"):
            live_server._run(
                [sys.executable, script, seen, "0"], log, timeout=1, what="building x",
                report=lambda text: None,
            )  # fmt: skip


def test_a_second_set_up_waits_for_the_first_then_gives_up_saying_so(tmp_path: Path) -> None:
    held = live_server._sibling("_setup_lock").held
    refused = pytest.raises(RuntimeError, match=r"another set-up held .*setup\.lock")
    with held(tmp_path, 60, RuntimeError), refused, held(tmp_path, 0, RuntimeError):
        pass
    with held(tmp_path, 0, RuntimeError):  # free again once the first is done
        assert (tmp_path / "setup.lock").exists()
