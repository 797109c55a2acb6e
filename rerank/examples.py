"""In-context example selection (paper Eq. 6): the test cases whose wording overlaps the query most.

Similarity is the Jaccard index of the two queries' term sets, using the same text pipeline as
the index (`lexicon.text.terms`: normalised, stopwords dropped, stemmed), so "attendances" and
"attendance" count as the same token here exactly as they do in retrieval.

Keeping held-out cases out of `cases` is the caller's job (the evaluator passes only the training
split); this function simply ranks what it is given.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from catalog.records import CaseRecord
from lexicon.text import jaccard, terms

from .records import Example


def select_examples(
    query: str,
    cases: Sequence[CaseRecord],
    task_names: Mapping[str, str],
    n: int = 3,
) -> list[Example]:
    """The top-`n` cases by Jaccard similarity with `query`, best first.

    - Cases with zero overlap are skipped: an unrelated example only costs prompt tokens.
    - Ties are broken by the case query text, then its gold ids, so the choice does not depend
      on the order in which the store returned the cases.
    - Out-of-scope cases (empty gold) are eligible; they teach the model that "none" is allowed.
    - Gold ids are mapped to names through `task_names`; ids missing from it (deleted or
      inactive tasks) are left out, and a case whose gold ids are *all* missing is skipped,
      because showing it with no gold would wrongly present it as out of scope.
    """
    if n <= 0:
        return []
    query_terms = set(terms(query))
    if not query_terms:
        return []
    scored: list[tuple[float, str, tuple[str, ...], Example]] = []
    for case in cases:
        score = jaccard(query_terms, set(terms(case.query)))
        if score <= 0.0:
            continue
        names = tuple(task_names[tid] for tid in case.gold if tid in task_names)
        if case.gold and not names:
            continue
        scored.append((-score, case.query, case.gold, Example(case.query, names, case.rationale)))
    scored.sort(key=lambda item: item[:3])
    return [example for *_, example in scored[:n]]
