"""SIRA's document-frequency filter (SIRA sec. 3.2): vocabulary an LLM proposes is kept only
when it is rare enough to discriminate, df <= max_df * N, on the corpus side before injection
and on the query side before expansion.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from kb.index import Index

DEFAULT_MAX_DF = 0.05      # corpus fraction; SIRA gives no value, 5% keeps idf >= ~2.9


@dataclass
class DFResult:
    kept: list[tuple[str, int]] = field(default_factory=list)      # (term, df)
    dropped: list[tuple[str, str]] = field(default_factory=list)   # (term, reason)


def df_filter(index: Index, candidates: Iterable[str], max_df: float = DEFAULT_MAX_DF, min_df: int = 0,
              view: str = "text", exclude_terms: Iterable[str] = ()) -> DFResult:
    """Keep candidates with min_df <= df <= max_df * N (SIRA's DF filter).

    Corpus side uses min_df=0 over the text view (enrichment brings new vocabulary); query side
    uses min_df=1 over the enriched view (a term must exist to affect BM25). Candidates that
    analyse to nothing, repeat an earlier candidate, or consist only of `exclude_terms`
    (e.g. the query's own terms) are dropped too.
    """
    bound = max_df * max(index.n_docs, 1)
    excluded = set(exclude_terms)
    seen: set[tuple[str, ...]] = set()
    out = DFResult()
    for cand in candidates:
        cand = (cand or "").strip()
        parts = tuple(index.analyze(cand))
        if not parts:
            out.dropped.append((cand, "no terms"))
            continue
        if parts in seen:
            out.dropped.append((cand, "duplicate"))
            continue
        seen.add(parts)
        if set(parts) <= excluded:
            out.dropped.append((cand, "already in query"))
            continue
        df = index.df(cand, view)
        if df < min_df:
            out.dropped.append((cand, f"df {df} < {min_df}"))
        elif df > bound:
            out.dropped.append((cand, f"df {df} > {bound:g}"))
        else:
            out.kept.append((cand, df))
    return out


def bound_enriched_df(index: Index, proposals: dict[str, list[tuple[str, float]]],
                      max_df: float) -> tuple[dict[str, list[tuple[str, float]]], int]:
    """The DF bound again, on the enriched view: a term's document frequency counts the documents
    whose text has it plus those it is about to be injected into. A term the LLM proposes for
    many documents says nothing about any one of them (a weak model proposing the same phrase
    everywhere would otherwise flood the index), so above max_df * N it is dropped everywhere.
    Returns the surviving proposals and how many (doc, term) pairs were dropped."""
    key = {term: tuple(index.analyze(term)) for terms in proposals.values() for term, _ in terms}
    proposed_in: dict[tuple, int] = {}
    for terms in proposals.values():
        for parts in {key[term] for term, _ in terms}:
            proposed_in[parts] = proposed_in.get(parts, 0) + 1
    bound = max(max_df * max(index.n_docs, 1), 1.0)
    too_common = {parts for parts, n in proposed_in.items() if n + index.df(" ".join(parts), "text") > bound}
    kept = {doc: [(t, w) for t, w in terms if key[t] not in too_common] for doc, terms in proposals.items()}
    dropped = sum(len(terms) - len(kept[doc]) for doc, terms in proposals.items())
    return {doc: terms for doc, terms in kept.items() if terms}, dropped
