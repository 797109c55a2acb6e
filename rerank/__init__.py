"""Constrained LLM re-ranking of the prefilter shortlist (paper §3.4-3.5).

The pipeline builds `Candidate`s from its shortlist, picks `Example`s with `select_examples`,
skips the call when `prefilter_is_confident`, and otherwise asks `Reranker.rerank`, which
always returns a permutation of the shortlist (see `reranker.py` for the order rule and the
degradation contract).
"""
from .examples import select_examples
from .prompt import PROMPT_VERSION
from .records import INVALID, UNAVAILABLE, Candidate, Example, RerankOutcome
from .reranker import Reranker
from .skip import prefilter_is_confident, relative_gap

__all__ = [
    "Candidate",
    "Example",
    "INVALID",
    "PROMPT_VERSION",
    "RerankOutcome",
    "Reranker",
    "UNAVAILABLE",
    "prefilter_is_confident",
    "relative_gap",
    "select_examples",
]
