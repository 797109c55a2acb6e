"""Type-ahead quality: Hit@5 of the product's ranking on PREFIXES of the held-out queries.

    python -m evaluation.prefixes --catalog catalog/data/headstart_catalog.jsonl \
        --cases catalog/data/headstart_cases.jsonl            # the demo, hash holdout 0.2 seed 42
    python -m evaluation.prefixes --clinc150 /work/shared/data/clinc150   # CLINC150 train -> val

What a person has typed after n characters is the held-out query cut at n (`query[:n]`, the
whole query when it is shorter); each cut is ranked exactly as /api/search ranks it (the
product's own fit on the training split only, its index, its signals, `rank_values`, pins), in
both modes: embeddings on ("full") and off ("sparse", the degraded mode). In-scope held-out
cases only (a prefix of an out-of-scope query has no gold). Results: docs/prefix-search.md.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from evaluation.evaluate import fit_on_training
from evaluation.metrics import hit_at, reciprocal_rank
from evaluation.replay import heldout_index, heldout_queries
from search.prefilter import rank_values

CUTS = (3, 5, 8)
DEPTH = 10


def prefix_cases(test, cut: int | None):
    """The in-scope held-out cases with their query cut after `cut` characters (None: whole)."""
    return [replace(case, query=case.query[:cut] if cut else case.query) for case in test
            if case.gold and (case.query[:cut] if cut else case.query).strip()]


def score(queries, params, mode: str) -> dict:
    hits, reciprocal = [], []
    for query in queries:
        result = rank_values(query.tasks, query.values_for(mode), params.weights, DEPTH, query.pinned,
                             query.out_of_scope_similarity)
        ranking, gold = [item.task.id for item in result.ranked], set(query.case.gold)
        hits.append(hit_at(ranking, gold, 5))
        reciprocal.append(reciprocal_rank(ranking, gold))
    n = len(hits)
    return {"n": n, "hit@5": round(sum(hits) / n, 4) if n else None, "mrr": round(sum(reciprocal) / n, 4) if n else None}


def run(settings, tasks, train, test, embedder, cuts=CUTS, seed: int = 42, cv_max_queries: int = 3000) -> dict:
    tasks = [t for t in tasks if t.active]
    params, _, _ = fit_on_training(settings, tasks, train, embedder, seed, cv_max_queries, show=False)
    index = heldout_index(settings, tasks, train, embedder, params)
    out = {}
    for cut in (*cuts, None):
        queries, _ = heldout_queries(settings, index, prefix_cases(test, cut), embedder)
        modes = ("full", "sparse") if embedder is not None and index.has_vectors else ("sparse",)
        out[str(cut or "whole")] = {mode: score(queries, params, mode) for mode in modes}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--catalog", type=Path)
    parser.add_argument("--cases", type=Path)
    parser.add_argument("--clinc150", type=Path)
    parser.add_argument("--holdout", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--max-test-per-intent", type=int, default=None, help="CLINC150: at most N val requests per intent")
    parser.add_argument("--cv-max-queries", type=int, default=3000, help="fit on at most this many CV queries")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    from app import create_app
    from evaluation.cli import _load

    app = create_app()
    with app.app_context():
        services = app.extensions["taskfinder"]
        tasks, train, test, source = _load(args.catalog, args.cases, None, args.holdout, args.seed, args.clinc150,
                                           None, args.max_test_per_intent)
        result = {"source": source, "cuts": run(services.settings, tasks, train, test, services.search.embedder,
                                                seed=args.seed, cv_max_queries=args.cv_max_queries)}
    text = json.dumps(result, indent=2, default=str)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
