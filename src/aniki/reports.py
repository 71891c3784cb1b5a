"""``ContextReport``: what each model call was sent, and why.

One report per model call, in ``RunResult.context_reports`` (streamed runs too), and one
DEBUG line per call on the logger ``aniki.context``. Token figures are estimates made with
the history policy's counter when it has one, else with
:func:`~aniki.tokens.counter_for_model` for the agent's model; what the provider billed is in
:attr:`ContextReport.usage`.

Each report is also kept on the assistant message its call produced
(:attr:`~aniki.Message.context`), so a store keeps it with the conversation (its stored form
is in :mod:`aniki._report_record`). Data only, below :mod:`aniki.messages`: the run builds
the reports in :mod:`aniki._run.reports`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .usage import Usage

__all__ = ["ContextReport", "ContextTokens"]


@dataclass(frozen=True, slots=True)
class ContextTokens:
    """A request's estimated tokens, by part.

    Example::

        tokens = result.context_reports[-1].tokens
        print(tokens.total, "tokens, of which history:", tokens.history)
    """

    instructions: int = 0
    """The agent's instructions (the leading system message)."""
    tools: int = 0
    """The tool definitions: names, descriptions and parameter schemas."""
    summary: int = 0
    """The summary standing for older messages (``SummarizingSession``)."""
    history: int = 0
    """The conversation's messages sent verbatim."""

    @property
    def total(self) -> int:
        """All parts added up."""
        return self.instructions + self.tools + self.summary + self.history


@dataclass(frozen=True, slots=True)
class ContextReport:
    """What one model call was sent, and why.

    Example::

        result = await Runner().run(agent, message="Hi")
        for report in result.context_reports:
            print(report.sent_messages, "of", report.stored_messages, "messages sent;",
                  "cache-friendly" if report.prefix_kept else "prefix changed")
    """

    stored_messages: int | None
    """How many messages the session holds when the call is made (not counting messages of
    this run that a stream has not stored yet): reported by every built-in store and history
    policy; ``None`` for a custom session that is neither a store offering
    ``get_messages(limit=...)`` nor a policy (it may be a view, so it cannot tell)."""
    sent_messages: int
    """How many stored messages were sent verbatim (the instructions and a summary are not
    counted; messages of this run that a stream has not stored yet are)."""
    summarized_messages: int
    """How many of the oldest stored messages a summary stood for (0 without one)."""
    tokens: ContextTokens
    """The request's estimated tokens, by part."""
    prefix_kept: bool | None
    """Whether the history starts where the previous call of this session started, so the
    request extends the previous one and a prompt cache can serve it: ``False`` when a
    window's cut moved or a new summary was made; ``None`` when the session cannot tell."""
    usage: Usage | None = None
    """What the provider reported for this call (``None`` when it reported nothing)."""
    shortened_messages: int = 0
    """How many of the messages sent were shortened: each cost more than the history
    policy's whole budget by itself, so its text was cut to fit, with a note saying so (the
    stored message stays whole)."""

    def describe(self) -> str:
        """One line for people: messages and tokens sent, and what the provider reported."""
        stored = "?" if self.stored_messages is None else str(self.stored_messages)
        parts = [f"{self.sent_messages} of {stored} messages sent"]
        if self.summarized_messages:
            parts.append(f"{self.summarized_messages} summarized")
        if self.shortened_messages:
            parts.append(f"{self.shortened_messages} shortened to fit")
        parts.append(f"~{self.tokens.total} tokens")
        if self.prefix_kept is not None:
            parts.append("prefix kept" if self.prefix_kept else "prefix changed")
        usage = self.usage
        if usage is not None and usage.input_tokens:
            share = usage.cache_read_tokens / usage.input_tokens
            parts.append(f"{usage.input_tokens} input tokens billed, {share:.0%} from cache")
        return ", ".join(parts)
