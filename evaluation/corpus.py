"""BEIR-style evaluation of a named document corpus (kb/): each search mode's ranking of the
judged queries, scored by evaluation.metrics.evaluate_run (nDCG@10, Recall@10/100, MRR@10).
`python app.py corpus evaluate` (cli/corpus.py) prints it; the engine (kb.search) knows no metrics."""
from __future__ import annotations

import time

from evaluation.metrics import evaluate_run
from kb.search import KB


def evaluate_corpus(kb: KB, name: str, queries: list[dict], qrels: dict, modes: list[str], k: int = 100,
                    progress: bool = False) -> dict:
    """{"modes": {mode: metrics | {"skipped": reason}}} over queries that have qrels."""
    from tqdm import tqdm

    queries = [q for q in queries if q["_id"] in qrels]
    out: dict = {"modes": {}}
    for mode in modes:
        reason = kb.unavailable(name, mode)
        if reason:
            out["modes"][mode] = {"skipped": reason}
            continue
        started = time.perf_counter()
        run = {q["_id"]: kb.ranking(name, q["text"], mode, k)
               for q in tqdm(queries, desc=mode, disable=not progress, leave=False)}
        metrics = evaluate_run(run, qrels)
        metrics["ms_per_query"] = round((time.perf_counter() - started) * 1000 / max(len(queries), 1), 3)
        out["modes"][mode] = metrics
    return out
