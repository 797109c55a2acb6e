"""The whole per-catalog fit, `fit_ranker`: the CV queries (search.fitting.cv), the fusion weights
of each mode (.weights), the signals each mode keeps (.metrics.choose_sparse_signals,
.learned), the shortlist depth (.metrics.choose_shortlist), the typing weights (.typed), the
abstention (.abstention, .calibration), the score-tail cut (.tail) and the prototypes serving will
hold (search.prototypes). The math of each step: the docstring of search.fitting and of the
module that holds it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from catalog.records import CaseRecord, TaskRecord
from search.assembly import Use, attach_vectors, build, prototypes_of
from search.fitting.abstention import abstention_negatives, fit_abstentions
from search.fitting.foreign import fit_foreign, written_in_other_language
from search.fitting.cv import FOLDS, MAX_CV_QUERIES, CVPass, CVQuery, FitContext, cases_digest, cv_queries
from search.fitting.learned import choose_learned_as_cases, choose_learned_signal, informative_learned, usable_learned
from search.fitting.metrics import choose_shortlist, choose_sparse_signals, ranked_ids, ranking_metrics, rankings
from search.fitting.tail import choose_tail_ratio
from search.fitting.typed import fit_typing, typing_queries
from search.fitting.weights import fit_weights
from search.learned import LearnedInputs, learned_digest, trusted_cases, unclicked_digest
from search.prefilter import TYPING_SIGNALS
from search.prototypes import encode
from search.ranker import MODES, FusionWeights, RankerParams
from settings import Settings

#: No evidence from use: no learned exemplars, no blocked pairs, no unclicked queries.
NO_USE = LearnedInputs((), frozenset())


@dataclass(frozen=True)
class FitOptions:
    """How fit_ranker cross-validates: the seed of its folds and samples, the most in-scope cases
    its weight fit scores (a stable hash sample; None: all), a callback per CV fold scored
    (`progress(fold, folds)`), and what a caller may have scored already: the CV `queries` of
    these cases (with their negatives, `abstention_negatives`) and the memo of the fold indexes
    that scored them (`fold_indexes`, see FitContext)."""

    seed: int = 42
    max_queries: int | None = MAX_CV_QUERIES
    progress: Callable | None = None
    queries: Sequence[CVQuery] | None = None
    fold_indexes: dict | None = None


def fit_ranker(settings: Settings, tasks: Sequence[TaskRecord], cases: Sequence[CaseRecord], embedder,
               defaults: RankerParams, use: LearnedInputs = NO_USE, options: FitOptions = FitOptions()
               ) -> tuple[RankerParams, dict]:
    """Fit every parameter on CV inside `cases`; returns (params, report). With fewer than
    settings.fit_min_cases in-scope cases the defaults are returned (and the report says so).
    `use` (search.learned.LearnedInputs): `learned`, exemplars learned from use
    (search.learned.eligible), minus the `blocked` (query, task) pairs; the CV decides whether
    they feed the `learned` signal (dense: with embeddings only) and whether they join the
    exemplar memory (choose_learned_as_cases); the signal's CV holds only the informative ones
    (informative_learned: issue 33 item 1). `unclicked`: see abstention_negatives.
    `options` (FitOptions): the CV's seed and sample, and the CV `queries` when the caller has
    them already; a caller that passes `queries` built with every pair (evaluation.evaluate) has
    the signal weighed on them all."""
    started = time.perf_counter()
    seed = options.seed
    tasks = [t for t in tasks if t.active]
    context = FitContext(settings, tasks, cases, embedder, seed, options.max_queries,
                         {} if options.fold_indexes is None else options.fold_indexes)
    # without embeddings the learned exemplars serve only as cases (the signal is dense)
    learned = usable_learned(use.learned, use.blocked, tasks)
    in_scope = [c for c in cases if c.gold]
    report: dict = {"n_cases": len(cases), "n_in_scope": len(in_scope), "n_out_of_scope": len(cases) - len(in_scope),
                    "folds": FOLDS, "seed": seed, "digest": cases_digest(tasks, cases)}
    if len(in_scope) < settings.fit_min_cases:
        report["status"] = f"defaults: fewer than {settings.fit_min_cases} in-scope test cases"
        return defaults, report
    negatives = abstention_negatives(settings, cases, use.unclicked)
    # the `learned` signal's weight is judged on the pairs that tell the ranking something
    informative = informative_learned(context, defaults, learned) if learned else ()
    written = CVPass(negatives=negatives, learned=informative)   # the pass the weights and the abstention are fitted on
    queries = options.queries
    if queries is None:
        queries = cv_queries(context, written, options.progress)
    # each language's weights and abstention on its own evidence: the cases written in another
    # language than the catalog's fit only the foreign ones (search.fitting.foreign), so adding
    # Spanish cases leaves the English weights as they were (the generic negatives serve both)
    other_language = [q for q in queries if q.source == "case" and written_in_other_language(q)]
    if other_language:
        queries = [q for q in queries if not (q.source == "case" and written_in_other_language(q))]
    modes = context.modes
    sparse_signals, sparse_choice = choose_sparse_signals(queries, defaults.weights)
    signals = {"full": None, "sparse": sparse_signals}
    fitted = {m: fit_weights(queries, m, defaults.weights.for_mode(m), signals=signals[m]) for m in modes}
    learned_signal = None
    if "full" in fitted:
        fitted["full"], learned_signal = choose_learned_signal(queries, defaults.weights, fitted["full"])
    weights = FusionWeights(fitted.get("full", defaults.weights.full), fitted["sparse"])
    report["cv"] = {}
    in_scope_queries = [q for q in queries if q.case.gold]
    for mode in modes:
        before = ranking_metrics(in_scope_queries, ranked_ids(in_scope_queries, defaults.weights, mode))
        after = ranking_metrics(in_scope_queries, ranked_ids(in_scope_queries, weights, mode))
        report["cv"][mode] = {"defaults": before, "fitted": after}
        if learned and mode == "full":
            report["cv"][mode]["fitted_without_learned"] = ranking_metrics(
                in_scope_queries, ranked_ids(in_scope_queries, FusionWeights(replace(weights.full, learned=0.0), weights.sparse), mode))
    report["cv"]["sparse"]["cross_fitted"] = sparse_choice
    if learned_signal is not None:
        report["cv"]["full"]["learned_signal"] = learned_signal
    as_cases = False
    primary = context.primary
    # The abstention is calibrated on the written cases scored without learned exemplars: with
    # them, a held-out written case often has a near-duplicate among the queries people typed
    # (one CLINC150 intent's phrasings came in batches) and its CV evidence runs optimistic, so the
    # threshold would refuse more of the answerable queries than the budget allows (simulator,
    # docs/learning-from-use.md). Served queries only gain evidence from the learned exemplars.
    calibration = queries
    if learned:   # the anonymous ones bounded by the trusted evidence, in the CV as in serving
        trial = CVPass(negatives=negatives, learned=informative, learned_as_cases=tuple(learned))
        queries, weights, as_cases = choose_learned_as_cases(context, trial,
                                                             defaults, queries, weights, report, signals)
        if other_language:   # (scored again with every case)
            queries = [q for q in queries if not (q.source == "case" and written_in_other_language(q))]
    shortlist = choose_shortlist(report["cv"][primary]["fitted"], defaults.shortlist_size)
    typed = typing_queries(context)
    # the prefixes read as still being typed are ranked with the typing weights (fitted on them);
    # the longer ones that read as whole (search.typed.TYPED_WHOLE) as whole queries: they only
    # set their own abstention threshold
    prefixes = [q for q in typed if q.unfinished]
    typing = fit_typing(prefixes, weights, defaults.weights, modes, signals) or FusionWeights(
        *(replace(weights.for_mode(m), **{name: getattr(defaults.weights.for_mode(m), name) for name in TYPING_SIGNALS})
          for m in MODES))
    if typing is not None:
        report["cv"]["typing"] = {mode: {"whole_weights": ranking_metrics(prefixes, ranked_ids(prefixes, weights, mode)),
                                         "typing_weights": ranking_metrics(prefixes, ranked_ids(prefixes, typing, mode))}
                                  for mode in modes}
    # a query in another language than the catalog's (search.fitting.foreign): its weights, then its abstention
    foreign = foreign_signals = None
    foreign_abstention: dict = {}
    if "full" in modes:
        foreign, foreign_signals, masked = fit_foreign([*queries, *other_language], weights)
        masked_in_scope = [q for q in masked if q.case.gold]
        report["cv"]["foreign"] = {"signals": list(foreign_signals),
                                   "fitted": ranking_metrics(masked_in_scope, ranked_ids(masked_in_scope, foreign, "full")),
                                   "own_weights": ranking_metrics(masked_in_scope,
                                                                  ranked_ids(masked_in_scope, weights, "full"))}
    abstention = fit_abstentions(context, calibration, written, defaults.weights, signals, typed, typing,
                                 (foreign, foreign_signals, other_language) if foreign is not None else None,
                                 foreign_abstention)
    # the score-tail cut of each mode, on the rankings the fit's own weights give the CV queries
    # (each mode's probabilities have their own spread: one ratio for both cut the degraded mode's
    # CLINC150 val found@5 0.929 -> 0.909)
    tail = {}
    for mode in modes:
        whole_ratio, whole_report = choose_tail_ratio(in_scope_queries, rankings(in_scope_queries, weights, mode))
        typing_ratio, typing_report = choose_tail_ratio(prefixes, rankings(prefixes, typing, mode))
        tail[mode] = (whole_ratio, typing_ratio)
        report["cv"][mode]["tail"] = {"whole": whole_report, "typing": typing_report}
    stored_prototypes = None
    if embedder is not None:
        # the exemplars serving will hold, and its written-only and trusted counterparts (search.index.with_use)
        index = attach_vectors(build(settings, tasks, cases, Use(as_cases=learned if as_cases else ())), embedder)
        matrix = prototypes_of(index)
        if matrix is not None:
            stored_prototypes = {"task_ids": [t.id for t in index.tasks], "matrix": encode(matrix)}
            if index.written is not None:   # contributions.learned's counterfactual
                stored_prototypes["written_matrix"] = encode(prototypes_of(index.written))
            if index.trusted is not None and trusted_cases(learned):   # else the written ones serve it
                stored_prototypes["trusted_matrix"] = encode(prototypes_of(index.trusted))
    used = (embedder is not None and weights.full.learned > 0) or as_cases
    params = RankerParams(weights, shortlist, abstention, "fit", None, stored_prototypes,
                          learned=tuple(learned) if used else (), learned_as_cases=as_cases, typing=typing,
                          tail=tail, foreign=foreign, foreign_abstention=foreign_abstention)
    if learned:
        report["learned"] = {"pairs": len(learned), "verified": sum(e.verified for e in learned),
                             "informative": len(informative),
                             "digest": learned_digest(learned),
                             "weight": weights.full.learned if embedder is not None else None,
                             "as_cases": as_cases, "used": used}
    if use.unclicked:
        report["unclicked"] = {"queries": len(use.unclicked), "digest": unclicked_digest(use.unclicked),
                               "negatives": sum(q.source == "unclicked" for q in calibration)}
    report.update(status="fitted", n_cv_queries=sum(q.source == "case" for q in queries),
                  n_cv_negatives=sum(q.source != "case" for q in queries), shortlist_size=shortlist,
                  abstention={m: (a.cv if a else None) for m, a in abstention.items()},
                  seconds=round(time.perf_counter() - started, 2))
    return params, report
