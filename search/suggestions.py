"""What to offer when a search gives no answer: a few queries to try instead, as a pure function.

When the abstention model finds no confident match (or nothing is visible), the response's
`suggestions` list gives the person somewhere to go, built only from the catalog and what the
prefilter already computed for this query, in this order:

    spelling  the query with its near-certain typos corrected from the catalog's vocabulary
              ("devlopmental scrn" -> "developmental scrn"), when a word changed
    task      the names of the nearest tasks the prefilter found (fused score above the average
              visible task) that the abstention model declined to assert
    topic     the most common categories of the visible tasks, only when nothing above applies

Everything comes from tasks the caller may see (the prefilter ranked only those), so a
suggestion never reveals a restricted task. The widget shows them as clickable queries.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

# A correction is offered only when it is this close (normalised Indel similarity in [0, 1]):
# the same bar as the embedder's in-place typo replacement (search.prefilter.EMBED_CORRECTION_MIN),
# so "harry" is not offered as "carry".
SPELLING_MIN_SIMILARITY = 0.9
SUGGESTION_LIMIT = 4


@dataclass(frozen=True)
class Suggestion:
    text: str
    kind: str          # "spelling" | "task" | "topic"

    def as_dict(self) -> dict:
        return {"text": self.text, "kind": self.kind}


def corrected_query(query_words: Sequence[str], corrections: Mapping[str, Sequence[tuple[str, float]]],
                    min_similarity: float = SPELLING_MIN_SIMILARITY) -> str | None:
    """The query's words with each near-certain typo replaced by its best correction, or None
    when no word changes."""
    changed = False
    out = []
    for word in query_words:
        found = corrections.get(word) or ()
        if found and found[0][1] >= min_similarity and found[0][0] != word:
            out.append(found[0][0])
            changed = True
        else:
            out.append(word)
    return " ".join(out) if changed else None


def topic_label(category: str) -> str:
    """A category id as a person would type it ("family_services" -> "family services")."""
    return category.replace("_", " ").strip()


def common_topics(categories: Iterable[str | None]) -> list[str]:
    """Categories of the visible tasks, most common first (ties by name)."""
    counts = Counter(topic_label(c) for c in categories if c and topic_label(c))
    return [name for name, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]


def suggest(query: str, query_words: Sequence[str], corrections: Mapping[str, Sequence[tuple[str, float]]],
            nearest: Sequence[tuple[str, float]], visible_categories: Iterable[str | None],
            limit: int = SUGGESTION_LIMIT) -> list[Suggestion]:
    """Up to `limit` distinct suggestions (see the module docstring). `nearest` holds (task name,
    fused score) of the prefilter's ranking before abstention, best first; a score <= 0 means no
    better than the average visible task, so it is no suggestion. Nothing equal to the query
    itself (ignoring case and spacing) is suggested."""
    seen = {" ".join(query.lower().split())}
    out: list[Suggestion] = []

    def add(text: str, kind: str) -> None:
        key = " ".join(text.lower().split())
        if key and key not in seen and len(out) < limit:
            seen.add(key)
            out.append(Suggestion(text, kind))

    spelling = corrected_query(query_words, corrections)
    if spelling:
        add(spelling, "spelling")
    for name, score in nearest:
        if score > 0:
            add(name, "task")
    if not out:
        for topic in common_topics(visible_categories):
            add(topic, "topic")
    return out
