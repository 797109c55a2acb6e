"""begins: the share of the task's known queries (its cases, name and aliases) that begin as
the query is typed (search.typed.begins_signal); only for a query still being typed.

Index time: `index.typed` (search.typed.build_typed_index), shared with the typed signal."""
from __future__ import annotations

import numpy as np

from search.signal.base import QueryContext, Signal
from search.typed import begins_signal


def value(ctx: QueryContext) -> np.ndarray:
    return begins_signal(ctx.index.typed, ctx.analysed.text, ctx.analysed.finished)[ctx.rows]


SIGNAL = Signal("begins", "typing",
                "the share of the task's known queries (cases, name, aliases) that begin as typed: only for a query "
                "still being typed (docs/prefix-search.md)", value,
                says="its name or example searches begin like this", abstention_evidence=True)
