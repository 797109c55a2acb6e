"""The score-tail cut (search.confidence.shown): a result is shown when it is pinned or when its
probability is at least r times the best one's,

    shown(t)  <=>  pinned(t)  or  p(t) >= r * max_t' p(t'),

with r fitted per catalog and mode (`choose_tail_ratio`): the largest ratio of TAIL_GRID whose
CV Hit@5 of what is shown stays within TAIL_MAX_LOSS (half a point) of showing all five, on the
rankings the fit's own weights give the CV queries (search.fitting.metrics.rankings).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from search.confidence import shown
from search.fitting.cv import CVQuery


# The score-tail cut (search.confidence.shown): the largest ratio in TAIL_GRID whose
# CV Hit@5 of what is shown stays within TAIL_MAX_LOSS of showing all five.
TAIL_GRID = (0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2)
TAIL_MAX_LOSS = 0.005


def shown_metrics(queries: Sequence[CVQuery], results, ratio: float, k: int = 5) -> dict:
    """Of the top `k` of each in-scope query's ranking, what the tail cut at `ratio` shows: Hit@k
    of the shown list, results shown per query, and the share of shown results that are wrong
    (not gold)."""
    hit, sizes, wrong = [], [], []
    for q, result in zip(queries, results):
        gold = set(q.case.gold)
        if not gold or not result.ranked:
            continue
        kept = [item.task.id for item in shown(result.ranked[:k], ratio)]
        hit.append(bool(gold & set(kept)))
        sizes.append(len(kept))
        wrong.append(sum(task_id not in gold for task_id in kept))
    n = len(hit)
    return {"n": n, "ratio": ratio, "hit@5": round(float(np.mean(hit)), 4) if n else None,
            "shown": round(float(np.mean(sizes)), 3) if n else None,
            "wrong_share": round(sum(wrong) / sum(sizes), 4) if n and sum(sizes) else None}


def choose_tail_ratio(queries: Sequence[CVQuery], results) -> tuple[float, dict]:
    """(ratio, report): the largest TAIL_GRID ratio whose CV Hit@5 of what is shown is within
    TAIL_MAX_LOSS of the uncut list's; the report holds the uncut and the chosen operating point."""
    uncut = shown_metrics(queries, results, 0.0)
    if not uncut["n"]:
        return 0.0, {"uncut": uncut}
    best = uncut
    for ratio in TAIL_GRID[1:]:
        point = shown_metrics(queries, results, ratio)
        if point["hit@5"] >= uncut["hit@5"] - TAIL_MAX_LOSS:
            best = point
    return best["ratio"], {"uncut": uncut, "chosen": best}
