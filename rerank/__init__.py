"""Constrained LLM re-ranking of the prefilter shortlist (paper §3.4-3.5).

The pipeline builds `Candidate`s from its shortlist, picks `Example`s with `select_examples`,
skips the call when the prefilter is sure (search.confidence.skip_rerank), and otherwise asks `Reranker.rerank`, which
always returns a permutation of the shortlist (see `reranker.py` for the order rule and the
degradation contract).
"""
from .examples import select_examples
from .prompt import PROMPT_VERSION
from .records import INVALID, UNAVAILABLE, Candidate, Example, RerankOutcome
from .reranker import Reranker

__all__ = [
    "Candidate",
    "Example",
    "INVALID",
    "PROMPT_VERSION",
    "RerankOutcome",
    "Reranker",
    "UNAVAILABLE",
    "select_examples",
]
