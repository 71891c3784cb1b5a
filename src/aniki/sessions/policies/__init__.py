"""History policies: views of a session that bound what is sent to the model.

- ``windowed.py``: :class:`WindowedSession`, the last messages
- ``budget.py``: :class:`TokenBudgetSession`, the last tokens
- ``summarizing.py``: :class:`SummarizingSession`, a summary and the recent messages
- ``_policy.py``, ``_select.py``, ``_cut.py``: what they share: valid starts (never
  splitting a tool call from its result), the stepped cut kept in the session's meta
- ``_clearing.py``: :class:`ClearToolResults`, old tool results cleared from a view in steps
- ``_shorten.py``: a message larger than a token budget, sent shortened to fit
- ``_summary.py``, ``_summary_claim.py``: stored summaries, and one summarizer per crossing
- ``_summary_view.py``: what a summary's tail sends (old results cleared) and a fold reads
- ``_summary_store.py``: the history and the summary's record, read and written off the loop
- ``_summarizer.py``: the summarizer's call, its reply capped and fitted off the event loop
"""

from ._clearing import ClearToolResults
from ._summary import Summary
from .budget import TokenBudgetSession
from .summarizing import SummarizingSession
from .windowed import WindowedSession

__all__ = [
    "ClearToolResults",
    "Summary",
    "SummarizingSession",
    "TokenBudgetSession",
    "WindowedSession",
]
