"""What ``live_server.py`` reads from output: the llama.cpp server's verbose log (how it
handled each request's prompt) and the llama-cpp-python build's, as it comes (how far it got).

The standard library only; ``live_server.py`` loads it by path, as the tests load that file.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO

__all__ = ["BuildProgress", "PromptEval", "parse_prompt_evals", "run_reporting"]

_PREFIX_HIT = re.compile(
    r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens to eval"
)
_FULLY_CACHED = re.compile(r"Llama\.generate: full prompt already cached")
_NO_REUSE = re.compile(r"Llama\.generate: \d+ prefix-match found but partial kv removal")
_PROMPT_EVAL = re.compile(r"prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens")


@dataclass(frozen=True)
class PromptEval:
    """How the server handled one request's prompt, read from its verbose log."""

    reused_tokens: int | None
    """Prompt tokens taken from the KV cache (the prefix this prompt shares with what the
    server evaluated last); ``None`` when the whole prompt was cached (its length is not
    logged then)."""
    evaluated_tokens: int
    """Prompt tokens the server computed."""

    @property
    def prompt_tokens(self) -> int | None:
        """The prompt's length in tokens (``None`` when it is not known: see above)."""
        if self.reused_tokens is None:
            return None
        return self.reused_tokens + self.evaluated_tokens


def parse_prompt_evals(log: str) -> list[PromptEval]:
    """One :class:`PromptEval` per completion request in a verbose llama-cpp-python log.

    Each request ends with llama.cpp's timing block (``prompt eval time = ... / N tokens``);
    before it, ``Llama.generate`` says how much of the prompt it found in the KV cache
    (``P prefix-match hit, remaining M prompt tokens to eval``) unless it found none. The
    timing's token count is at least 1 even when nothing was evaluated, so the prefix line's
    figures win when there is one.
    """
    evals: list[PromptEval] = []
    pending: PromptEval | None = None
    for line in log.splitlines():
        if match := _PREFIX_HIT.search(line):
            pending = PromptEval(int(match[1]), int(match[2]))
        elif _FULLY_CACHED.search(line):
            pending = PromptEval(None, 0)
        elif _NO_REUSE.search(line):
            pending = None
        elif match := _PROMPT_EVAL.search(line):
            evals.append(pending if pending is not None else PromptEval(0, int(match[1])))
            pending = None
    return evals


# Ninja's "[45/151] Building CXX object ..." and make's "[ 30%] Building ...", as CMake
# prints them through scikit-build-core when pip runs the build verbosely.
_STEP = re.compile(r"^\s*\[(\d+)/(\d+)\]\s")
_PERCENT = re.compile(r"^\s*\[\s*(\d+)%\]\s")


class BuildProgress:
    """How far a build got, from the lines of its output as they come."""

    def __init__(self) -> None:
        self.step: tuple[int, int] | None = None
        self.percent: int | None = None
        self.started = time.monotonic()

    def feed(self, line: str) -> None:
        if match := _STEP.match(line):
            self.step = (int(match[1]), int(match[2]))
        elif match := _PERCENT.match(line):
            self.percent = int(match[1])

    def describe(self) -> str:
        """E.g. ``4 min 10 s so far, compiling: step 45 of 151 (30%)``."""
        minutes, seconds = divmod(int(time.monotonic() - self.started), 60)
        elapsed = f"{minutes} min {seconds:02d} s so far"
        if self.step is not None:
            done, total = self.step
            return f"{elapsed}, compiling: step {done} of {total} ({done / total:.0%})"
        if self.percent is not None:
            return f"{elapsed}, compiling: {self.percent}%"
        return f"{elapsed}, fetching the source and configuring"


def run_reporting(
    cmd: Sequence[str],
    *,
    log: IO[str],
    env: Mapping[str, str],
    timeout: float,
    report: Callable[[str], None],
    every: float = 30.0,
) -> None:
    """Run ``cmd`` with its output copied to ``log``, calling ``report`` with how far it got
    every ``every`` seconds. Raises as ``subprocess.run(..., check=True, timeout=...)`` does
    (the process is killed at the timeout)."""
    progress = BuildProgress()
    process = subprocess.Popen(
        list(cmd),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=dict(env),
        text=True,
        errors="replace",
    )
    assert process.stdout is not None
    copier = threading.Thread(target=_copy, args=(process.stdout, log, progress), daemon=True)
    copier.start()
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                process.wait(max(0.0, min(every, deadline - time.monotonic())))
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    raise subprocess.TimeoutExpired(list(cmd), timeout) from None
                report(progress.describe())
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        copier.join(10)
    if process.returncode:
        raise subprocess.CalledProcessError(process.returncode, list(cmd))


def _copy(output: IO[str], log: IO[str], progress: BuildProgress) -> None:
    for line in output:
        log.write(line)
        progress.feed(line)
    log.flush()
