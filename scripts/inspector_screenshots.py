"""Take the screenshots of ``aniki inspect`` that the docs show (docs/images/inspector-*.png).

Builds a small store of real runs (a scripted model that bills like a prompt cache, a tool,
a picture, reasoning, a summarizing policy), serves it with the inspector and photographs
four pages with Debian's headless chromium (packages ``chromium`` and ``chromium-driver``;
selenium from the dev extra)::

    .venv/bin/python scripts/inspector_screenshots.py
"""

from __future__ import annotations

import base64
import os
import shutil
import struct
import tempfile
import zlib
from pathlib import Path
from typing import Any

from aniki import Agent, Attachment, Message, Reasoning, Runner, ToolCall, Usage, tool
from aniki.inspector._serve import running
from aniki.providers.base import ModelRequest, ModelResponse
from aniki.sessions import SummarizingSession, open_store
from aniki.testing import MockProvider

OUT = Path(__file__).resolve().parent.parent / "docs" / "images"
WIDTH, HEIGHT = 1280, 900
SESSION = "trip-to-lyon"
QUESTIONS = [
    "Hi! I'm planning a weekend in Lyon. What should I pack?",
    "Here is the hotel I booked. Does it look central?",
    "What's the weather going to be like in Lyon?",
    "Where can I get a good lunch near Place Bellecour?",
    "Is the funicular up to Fourvière worth it?",
    "What's the weather in Annecy, for a day trip?",
    "How do I get from Lyon to Annecy by train?",
    "Any museum you'd recommend on a rainy afternoon?",
    "Thanks! Can you sum up the plan for me?",
]
ANSWERS = [
    "Light layers, comfortable shoes for the old town's cobbles, and an umbrella just in case.",
    "Yes: it is on the Presqu'île, a short walk from Bellecour and the Saône.",
    "Mild and mostly sunny, around 19 °C, with a chance of a shower on Sunday evening.",
    "Try a bouchon on Rue Mercière; book ahead for Saturday.",
    "It is: two minutes up, and the view over the city from the basilica is the best there is.",
    "Cooler by the lake, around 16 °C, and clear in the morning.",
    "Direct TER trains leave Lyon Part-Dieu about every two hours; the trip takes 2 h.",
    "The Musée des Confluences: science and anthropology in a striking building.",
    "Saturday: Vieux Lyon, the funicular, lunch on Rue Mercière. Sunday: Annecy by train.",
]


@tool
def weather(city: str) -> str:
    """The forecast for a city."""
    return f"{city}: 19 °C, sunny spells, light wind from the south."


def picture() -> bytes:
    """A small PNG postcard: sky over a river."""
    width, height = 96, 64
    rows = []
    for y in range(height):
        colour = (120, 170, 225) if y < 40 else (60, 120, 160) if y < 52 else (70, 140, 80)
        rows.append(b"\x00" + bytes(colour) * width)

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    head = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", head)
        + chunk(b"IDAT", zlib.compress(b"".join(rows)))
        + chunk(b"IEND", b"")
    )


class TravelModel:
    """Answers from the script above and bills like a provider with a prompt cache: the
    request's tokens (4 characters a token) sent, the part repeating the last request cached."""

    def __init__(self) -> None:
        self.previous: list[str] = []

    def __call__(self, request: ModelRequest) -> ModelResponse:
        texts = [m.role + m.content for m in request.messages]
        cached = 300 if self.previous else 0  # the instructions and tools, once seen
        shared = 0
        for old, new in zip(self.previous, texts, strict=False):
            if old != new:
                break
            shared += len(new) // 4 + 4
        self.previous = texts
        usage = Usage(
            input_tokens=sum(len(t) // 4 + 4 for t in texts) + 300,  # instructions and tools
            output_tokens=40,
            requests=1,
            cache_read_tokens=cached + shared,
        )
        last = request.messages[-1]
        if last.role == "user" and "weather" in last.content:
            city = "Annecy" if "Annecy" in last.content else "Lyon"
            call = ToolCall(f"call_{city.lower()}", "weather", f'{{"city": "{city}"}}')
            return ModelResponse(tool_calls=(call,), usage=usage, model="travel-model-1")
        asked = next(m.content for m in reversed(request.messages) if m.role == "user")
        answer = ANSWERS[QUESTIONS.index(asked)] if asked in QUESTIONS else "Happy to help."
        thought = Reasoning("The user is planning a short trip; answer concretely and briefly.")
        return ModelResponse(
            content=answer,
            usage=usage,
            model="travel-model-1",
            reasoning=(thought,),
        )


def fill(url: str) -> None:
    summarizer = Agent(
        name="summarizer",
        model="travel-model-1",
        provider=MockProvider(
            handler=lambda r: (
                "The user is planning a weekend in Lyon: packing, a central "
                "hotel, lunch near Bellecour, the Fourvière funicular."
            )
        ),
    )
    agent = Agent(
        name="travel",
        instructions="You help people plan trips. Be brief and concrete.",
        model="travel-model-1",
        provider=MockProvider(handler=TravelModel()),
        tools=[weather],
    )
    runner = Runner()
    with open_store(url) as store:
        session = SummarizingSession(
            store.session(SESSION), summarizer, max_tokens=1500, keep_recent=600
        )
        for turn, question in enumerate(QUESTIONS):
            message: Any = question
            if turn == 1:
                image = Attachment("image/png", data=picture(), name="hotel-view.png")
                message = Message("user", question, attachments=(image,))
            runner.run_sync(agent, message=message, session=session)
        for other, (question, answer) in {
            "support-4711": ("My order hasn't arrived yet.", "Sorry! It ships tomorrow."),
            "recipes/sunday": ("A quick dessert for six?", "A lemon posset: cream, sugar, lemon."),
        }.items():
            store.session(other).add_message(Message("user", question))
            store.session(other).add_message(Message("assistant", answer))


def browser(profile: str) -> Any:
    os.environ["SE_OFFLINE"] = "true"  # never let selenium download a driver
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        f"--window-size={WIDTH},{HEIGHT}",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def shoot(driver: Any, name: str, *, height: int = HEIGHT, end: str | None = None) -> None:
    """Save the page's top ``height`` pixels, 1280 wide, or down to just below the element
    ``end`` when that comes first."""
    if end is not None:
        bottom = driver.execute_script(
            "return arguments[0].getBoundingClientRect().bottom + window.scrollY + 16",
            driver.find_element("css selector", end),
        )
        height = min(height, int(bottom))
    page = driver.execute_script("return document.documentElement.scrollHeight")
    clip = {"x": 0, "y": 0, "width": WIDTH, "height": min(height, page), "scale": 1}
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot",
        {"format": "png", "clip": clip, "captureBeyondViewport": True},
    )
    path = OUT / name
    path.write_bytes(base64.b64decode(shot["data"]))
    print(f"{path.relative_to(OUT.parent.parent)}: {path.stat().st_size // 1024} KB")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    work = tempfile.mkdtemp(prefix="aniki-shots-")
    here = os.getcwd()
    os.chdir(work)  # so the page shows the store as sqlite:///chats.db
    driver = None
    try:
        fill("sqlite:///chats.db")
        driver = browser(os.path.join(work, "profile"))
        with running("sqlite:///chats.db") as address:
            driver.get(address)
            shoot(driver, "inspector-sessions.png", end="table.sessions")
            driver.get(f"{address}session?id={SESSION}")
            # The last call, the one sent a summary.
            last_call = driver.find_elements("css selector", "a.call-link")[-1].get_attribute(
                "href"
            )
            driver.get(f"{address}session?id={SESSION}&start=0&size=12")
            driver.find_element("css selector", "details.reasoning summary").click()
            shoot(driver, "inspector-conversation.png", height=1100)
            driver.get(last_call)
            shoot(driver, "inspector-call.png", height=820)
            driver.get(f"{address}usage?id={SESSION}")
            shoot(driver, "inspector-usage.png", height=1100, end="table.turns")
    finally:
        if driver is not None:
            driver.quit()
        os.chdir(here)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
