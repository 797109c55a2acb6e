"""Tokenisation for the knowledge base, composed from `lexicon.text` (never a second pipeline).

`analyze(text)` is `lexicon.text.terms(text)`: normalised, stopwords removed, Snowball-stemmed,
with hyphen/colon/slash compounds split *and* joined ("ASQ-3" -> asq, 3, asq3).
`analyze(text, join_compounds=False)` is the BEIR-parity variant: joiners become spaces before
`lexicon.text.words`, so "ASQ-3" yields only asq, 3 (as Lucene's StandardAnalyzer would).

Enrichment phrases become atomic n-gram tokens by joining their terms with "_" ("heart attack"
-> "heart_attack"); "_" never survives `lexicon.text.words`, so such tokens cannot collide with
tokens of ordinary text.
"""
from __future__ import annotations

import re

from lexicon.normalise import normalise
from lexicon.text import stem, terms, words

NGRAM_JOINER = "_"
_JOINERS = re.compile(r"[-:/']")


def analyze(text: str, join_compounds: bool = True) -> list[str]:
    """Index/query terms of `text` (duplicates kept, in order)."""
    if join_compounds:
        return terms(text)
    return [stem(w) for w in words(_JOINERS.sub(" ", normalise(text)))]


def ngram_token(parts: list[str] | tuple[str, ...]) -> str:
    """The atomic token of an n-gram of analysed terms: ("heart", "attack") -> "heart_attack"."""
    return NGRAM_JOINER.join(parts)


def sliding_ngrams(parts: list[str], n_max: int) -> list[tuple[str, ...]]:
    """All contiguous n-grams of `parts` with 1 <= n <= n_max, left to right, shortest first."""
    out: list[tuple[str, ...]] = []
    for n in range(1, min(n_max, len(parts)) + 1):
        out.extend(tuple(parts[i:i + n]) for i in range(len(parts) - n + 1))
    return out
