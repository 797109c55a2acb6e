"""Learning from use in the fit: which learned exemplars (search.learned) it may use
(`usable_learned`), which of them tell the ranking something (`informative_learned`), whether the
`learned` signal keeps its weight (`choose_learned_signal`: the cross-fitted MRR with and without
it, and LEARNED_SIGNAL_NET_WINS more first hits than losses), and whether the exemplars join the
exemplar memory as cases (`choose_learned_as_cases`: a one-sided McNemar test on paired Hit@1,
McNemar 1947, "Note on the sampling error of the difference between correlated proportions or
percentages", Psychometrika 12). Why each rule: the docstrings below and docs/learning-from-use.md.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from catalog.records import TaskRecord
from search.assembly import attach_vectors, build
from search.fitting.cv import CVPass, CVQuery, FitContext, cv_queries
from search.fitting.metrics import cross_fitted_gold_ranks, net_first_wins, rank_summary, ranked_ids, ranking_metrics
from search.fitting.weights import fit_weights
from search.learned import LearnedExemplar
from search.pipeline import make_pipeline
from search.prefilter import SIGNALS
from search.ranker import MODES, FusionWeights, RankerParams
from search.request import EVERYONE, SearchRequest
from settings import Weights


def usable_learned(learned: Sequence[LearnedExemplar], blocked: frozenset[tuple[str, str]],
                   tasks: Sequence[TaskRecord]) -> tuple[LearnedExemplar, ...]:
    """The learned exemplars the fit may use: not blocked by the admin, on an active task."""
    active = {t.id for t in tasks if t.active}
    return tuple(e for e in learned if (e.query, e.task_id) not in blocked and e.task_id in active)


def informative_learned(context: FitContext, defaults: RankerParams, learned: Sequence[LearnedExemplar]
                        ) -> tuple[LearnedExemplar, ...]:
    """The learned pairs that tell the ranking something: those whose task the ranking from the
    written cases alone (`first_written_answers`) does not already put first for the pair's
    query. Only these feed the `learned` signal in the CV that weighs it (fit_ranker's first
    pass, choose_learned_signal); serving then holds every usable pair.

    Why (issue 33 item 1): a click on what the ranking already puts first is no evidence that
    the `learned` signal knows better than the written cases. Cover traffic of that kind is free
    to make (the demo's public test-case queries + " please", each clicked on its top result),
    and it leaked the written cases into the signal: in the CV each held-out case found its gold
    through "<its query> please", so the signal looked predictive (weight 20 over 121 such
    pairs) and a wrong task clicked at rank 10 by the same two networks rose to rank 3. A pair
    that moves a task up, by contrast, must earn the weight on the written cases.

    The as-cases test (choose_learned_as_cases) still tries every pair as an exemplar, by
    McNemar on the written cases: there the agreeing pairs are what generalises (judged on the
    informative pairs alone, the simulator's 4,000 searches gave val Hit@1 0.790 instead of
    0.865: no exemplars taken); its folds leave out near copies of their held-out cases
    (search.fitting.cv.near_copies), so cover made of the cases' own queries proves nothing."""
    if not learned:
        return ()
    first = first_written_answers(context, defaults, sorted({e.query for e in learned}))
    return tuple(e for e in learned if first.get(e.query) != e.task_id)


def first_written_answers(context: FitContext, defaults: RankerParams, queries: Sequence[str]) -> dict[str, str | None]:
    """query -> the task the catalog indexed from its written cases alone ranks first for it,
    with the default weights of the fit's primary mode (full with embeddings, else sparse),
    every task visible (None: nothing ranked). A learned query is read as typed
    (SearchRequest.typed): whether it is still being typed is the prefilter's reading."""
    settings, cases, embedder = context.settings, context.cases, context.embedder
    index = build(settings, context.tasks, cases)
    if embedder is not None:
        index = attach_vectors(index, embedder)
    pipeline = make_pipeline(index, defaults, settings, embedder)
    requests = [SearchRequest.typed(q, EVERYONE, k=1) for q in queries]
    analysed = [pipeline.analyse(request) for request in requests]
    first: dict[str, str | None] = {}
    for query, request, a, vector in zip(queries, requests, analysed, pipeline.embed(analysed)):
        result = pipeline.fuse(pipeline.score(request, a, vector), request.k, defaults.weights).result
        first[query] = result.ranked[0].task.id if result.ranked else None
    return first


# The `learned` signal must put the gold first on this many more held-out queries than it loses.
LEARNED_SIGNAL_NET_WINS = 3


def choose_learned_signal(queries: Sequence[CVQuery], prior: FusionWeights, fitted: Weights
                          ) -> tuple[Weights, dict | None]:
    """The full mode's weights with the `learned` signal kept only where cross-fitted CV says it
    earns its place (the protocol of choose_sparse_signals): the in-scope queries' MRR, each
    fold ranked by weights fitted on the other folds with the signal and without it; the signal
    stays only when that MRR is higher with it and it puts the gold first on at least
    LEARNED_SIGNAL_NET_WINS (3) more of the same queries than it loses (`net_first_wins`).
    In-sample, its weight is fitted on the very queries that judge it: with a few learned pairs
    (CLINC150 simulator, 500 and 1,000 searches) it took weights of 9-13 while val Hit@1 fell by
    0.5-0.8 points. And a higher MRR alone can be one query: a right pair that helps the one
    held-out case near it bought the signal a weight for every pair beside it, a wrong one
    included; two networks can make at most 2 pairs count (search.learned.heavy_networks), so
    they must not be able to buy a weight with 1 or 2 (issue 33 item 1). `fitted` as it is, and
    no report, where the in-sample fit gave the signal no weight."""
    if not fitted.learned:
        return fitted, None
    with_ranks = cross_fitted_gold_ranks(queries, prior, "full")
    without_ranks = cross_fitted_gold_ranks(queries, prior, "full", SIGNALS)
    with_signal, without = rank_summary(with_ranks), rank_summary(without_ranks)
    first = net_first_wins(with_ranks, without_ranks)
    keep = (bool(with_signal.get("n")) and with_signal["mrr"] > without["mrr"]
            and first["wins"] - first["losses"] >= LEARNED_SIGNAL_NET_WINS)
    report = {"with": with_signal, "without": without, "first_hits": first, "kept": keep}
    return (fitted if keep else fit_weights(queries, "full", prior.full, signals=SIGNALS)), report


# One-sided McNemar test (normal approximation) on paired Hit@1, for "learned exemplars as cases".
PAIRED_Z = 1.645


def paired_first_hits(queries_a: Sequence[CVQuery], ranked_a, queries_b: Sequence[CVQuery], ranked_b,
                      z: float = PAIRED_Z) -> dict:
    """Whether ranking B finds the gold first on significantly more of the same queries than A:
    with w the queries only B gets right at rank 1 and l those only A does (McNemar 1947;
    one-sided, normal approximation),

        better  <=>  w - l > z * sqrt(w + l)

    A difference of a query or two on a few hundred CV queries is noise, and a change that wins
    on noise (wrong learned pairs, measured: +2 of 206 demo queries) must not be taken."""
    def first_hits(queries, ranked) -> dict[str, bool]:   # each query's ranked ids (metrics.ranked_ids)
        return {q.case.query: bool(ids) and ids[0] in q.case.gold for q, ids in zip(queries, ranked)}

    a, b = first_hits(queries_a, ranked_a), first_hits(queries_b, ranked_b)
    shared = a.keys() & b.keys()
    wins = sum(b[q] and not a[q] for q in shared)
    losses = sum(a[q] and not b[q] for q in shared)
    return {"n": len(shared), "wins": wins, "losses": losses,
            "better": wins - losses > z * float(np.sqrt(wins + losses)) if wins + losses else False}


def choose_learned_as_cases(context: FitContext, cv: CVPass, defaults: RankerParams, queries: Sequence[CVQuery],
                            weights: FusionWeights, report: dict, signals: dict | None = None
                            ) -> tuple[Sequence[CVQuery], FusionWeights, bool]:
    """Whether the learned exemplars should also join the exemplar memory and lexicon
    (search.learned.learned_cases), decided by the same CV: the written cases' held-out folds
    are scored by indexes with and without them (each fold without its own queries) and the
    weights fitted on each; the learned exemplars become cases only when that raises the CV
    Hit@1 of the fit's primary mode (context.primary: full, or sparse without embeddings) by
    more than noise (paired_first_hits, on the same written cases). `cv`: the fit's negatives,
    the learned exemplars to try as cases (`cv.learned_as_cases`; each fold leaves out its
    held-out queries and their near copies: search.fitting.cv.near_copies) and those the
    `learned` signal holds (`cv.learned`: the informative ones, as in the fit's first pass);
    `queries`, `weights`: the fit's CV queries and weights so far.
    A catalog where use does not generalise keeps the `learned` signal alone (or nothing).
    Returns (queries, weights, as_cases); the report's cv[mode] gets `fitted_learned_as_cases`."""
    mode = context.primary
    alternative = cv_queries(context, cv)
    in_scope = [q for q in alternative if q.case.gold]
    signals = signals or {}
    modes = [m for m in report["cv"] if m in MODES]
    full = weights.full
    if "full" in modes:
        full, guard = choose_learned_signal(alternative, defaults.weights,
                                            fit_weights(alternative, "full", defaults.weights.full))
        if guard is not None:
            report["cv"]["full"]["learned_signal_with_cases"] = guard
    candidate = FusionWeights(full, fit_weights(alternative, "sparse", defaults.weights.sparse,
                                                signals=signals.get("sparse")))
    with_cases = ranking_metrics(in_scope, ranked_ids(in_scope, candidate, mode))
    report["cv"][mode]["fitted_learned_as_cases"] = with_cases
    same = [q for q in queries if q.case.gold]
    test = paired_first_hits(same, ranked_ids(same, weights, mode), in_scope, ranked_ids(in_scope, candidate, mode))
    report["cv"][mode]["learned_as_cases_test"] = test
    if test["better"]:
        for m in modes:   # a degraded server holds the same exemplars (the sparse exemplar document)
            before = report["cv"][m]["fitted"]
            report["cv"][m].update(defaults=ranking_metrics(in_scope, ranked_ids(in_scope, defaults.weights, m)),
                                   fitted=ranking_metrics(in_scope, ranked_ids(in_scope, candidate, m)))
            report["cv"][m]["fitted_learned_signal_only" if m == "full" else "fitted_without_learned"] = before
        return alternative, candidate, True
    return queries, weights, False
