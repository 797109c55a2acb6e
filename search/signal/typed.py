"""typed: BM25 over each task's words as typed (stopwords kept), the query's last word read as
a prefix (and, from 4 letters, with one typo): prefix evidence of a query still being typed
(search.typed.typed_signal). Computed, and so weighed, only for a query read as unfinished.

Index time: `index.typed` (search.typed.build_typed_index: a sorted vocabulary of the words as
typed, their postings and completions). 0 for a query in another language than the catalog's
(lexicon.language): "no evidence", as for the lexical signal."""
from __future__ import annotations

import numpy as np

from search.signal.base import QueryContext, Signal
from search.typed import typed_signal


def value(ctx: QueryContext) -> np.ndarray:
    if ctx.analysed.foreign:   # another language's prefix is no evidence about the catalog's words
        return np.zeros(ctx.rows.size, dtype=np.float32)
    return typed_signal(ctx.index.typed, ctx.analysed.text, ctx.analysed.finished)[ctx.rows]


SIGNAL = Signal("typed", "typing",
                "BM25 over the task's words as typed (stopwords kept), the last word read as a prefix: only for a "
                "query still being typed (docs/prefix-search.md)", value,
                says=None,   # the why line names the word itself ("“dev” begins “Development”": search.prefilter)
                abstention_evidence=True)
