"""When the prefilter is sure enough that an LLM call would not change the answer.

The rule uses the *relative gap* between the two best fused prefilter scores:

    gap = (top - second) / top

and calls the prefilter confident when `gap >= margin` and the top strictly exceeds the second
(a tie is never confident). With the default RERANK_SKIP_MARGIN=0.25 the LLM is skipped when
the best task scores at least 25% above the runner-up. `relative_gap` is exported so the
pipeline can log the gap per query and the margin can be tuned against evaluation runs (e.g.
Hit@1 of skipped queries vs. re-ranked ones). With non-negative scores the gap is at most 1,
so a margin above 1 never skips.
"""
from __future__ import annotations

from typing import Sequence


def relative_gap(scores: Sequence[float]) -> float:
    """(top - second) / top over the two highest scores; 1.0 for a single score, 0.0 when top <= 0."""
    if not scores:
        return 0.0
    ranked = sorted(scores, reverse=True)
    top = ranked[0]
    if len(ranked) == 1:
        return 1.0
    if top <= 0.0:
        return 0.0
    return (top - ranked[1]) / top


def prefilter_is_confident(scores: Sequence[float], margin: float) -> bool:
    """True when the LLM call can be skipped (see the module docstring for the rule).

    Fewer than two candidates is always confident: there is nothing to re-order.
    """
    if len(scores) < 2:
        return True
    gap = relative_gap(scores)
    return gap > 0.0 and gap >= margin
