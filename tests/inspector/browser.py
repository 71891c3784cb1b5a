"""A real browser for the inspector's tests: Debian's headless chromium, driven by selenium.

:func:`chrome` starts one and quits it when the block ends; when chromium, its driver or
selenium is missing it skips the test with what to install (under ``CI=true`` it fails:
CI must run every test, and ``.ci/run`` installs them). The browser never reaches beyond
loopback: no first-run, sync, component or background traffic, and selenium is told the
driver's path so it never looks for one to download.

Override the binaries with ``ANIKI_TEST_CHROMIUM`` and ``ANIKI_TEST_CHROMEDRIVER``.
"""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, NoReturn

import pytest

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

CHROMIUM = os.environ.get("ANIKI_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("ANIKI_TEST_CHROMEDRIVER", "/usr/bin/chromedriver")
WIDTH, HEIGHT = 1280, 900
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    f"--window-size={WIDTH},{HEIGHT}",
)


def _missing(message: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message} (CI=true: the browser tests must run; .ci/run installs them)")
    pytest.skip(message)


def _problem() -> str | None:
    """Why no browser can be started here, or ``None``."""
    absent = [path for path in (CHROMIUM, CHROMEDRIVER) if not os.access(path, os.X_OK)]
    if absent:
        return (
            f"no {' or '.join(absent)}: install Debian's chromium and chromium-driver "
            "(apt-get install chromium chromium-driver)"
        )
    try:
        import selenium  # noqa: F401
    except ModuleNotFoundError:
        return "the browser tests need selenium: pip install -e '.[dev]'"
    return None


@contextmanager
def chrome() -> Iterator[WebDriver]:
    """A headless chromium with a fresh profile, 1280x900; quit (and its profile removed)
    when the block ends, even when it fails."""
    problem = _problem()
    if problem:
        _missing(problem)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="aniki-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    service = Service(CHROMEDRIVER)
    try:
        offline = os.environ.get("SE_OFFLINE")
        os.environ["SE_OFFLINE"] = "true"  # selenium-manager must never download a driver
        try:
            driver = webdriver.Chrome(service=service, options=options)
        except Exception as exc:
            _missing(f"chromium did not start: {type(exc).__name__}: {exc}".strip())
        finally:
            if offline is None:
                del os.environ["SE_OFFLINE"]
            else:
                os.environ["SE_OFFLINE"] = offline
        try:
            driver.set_window_size(WIDTH, HEIGHT)
            driver.set_page_load_timeout(30)
            yield driver
        finally:
            try:
                driver.quit()
            finally:
                service.stop()  # a no-op after quit(); kills the driver if quit() failed
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def png_pixels(data: bytes) -> tuple[int, int, list[tuple[int, int, int]]]:
    """``(width, height, pixels)`` of a non-interlaced 8-bit RGB or RGBA PNG (what chromium's
    screenshots are), the pixels as RGB row by row. Enough PNG to count colours in a test."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    offset, idat = 8, b""
    width = height = channels = 0
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind, body = data[offset + 4 : offset + 8], data[offset + 8 : offset + 8 + length]
        offset += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw = zlib.decompress(idat)
    stride = width * channels
    pixels: list[tuple[int, int, int]] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        method, row = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = row[i - channels] if i >= channels else 0
            up, corner = previous[i], previous[i - channels] if i >= channels else 0
            if method == 1:
                row[i] = (row[i] + left) & 0xFF
            elif method == 2:
                row[i] = (row[i] + up) & 0xFF
            elif method == 3:
                row[i] = (row[i] + (left + up) // 2) & 0xFF
            elif method == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                near = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                row[i] = (row[i] + near) & 0xFF
        pixels.extend((row[x], row[x + 1], row[x + 2]) for x in range(0, stride, channels))
        previous = row
    return width, height, pixels


def near(pixels: list[tuple[int, int, int]], colour: str, *, within: int = 24) -> int:
    """How many of ``pixels`` are within ``within`` of ``colour`` (``#rrggbb``) in each
    channel."""
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return sum(
        1
        for pr, pg, pb in pixels
        if abs(pr - r) <= within and abs(pg - g) <= within and abs(pb - b) <= within
    )
