"""One evaluation run: fit on the training split -> configurations x held-out cases -> metrics,
CIs, significance, abstention, error analysis. The report dict is what `--json` writes.
"""
from __future__ import annotations

import platform
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from catalog.records import CaseRecord, TaskRecord
from rerank import Reranker
from search.fitting import (FOLDS, MAX_CV_QUERIES, CVPass, CVQuery, FitContext, FitOptions, abstention_negatives,
                            cv_queries, fit_ranker)
from search.learned import LearnedExemplar, LearnedInputs, normalised_query
from search.pipeline import Pipeline
from search.ranker import default_params
from settings import Settings

from . import errors as error_analysis
from .configs import BASELINE, ConfigSpec, config_specs
from .metrics import METRIC_KEYS, bootstrap_ci, mean_metrics, per_query, percentile, randomisation_test
from .replay import abstention_point, heldout_index, heldout_queries, replay_pipeline, run_bm25, run_replay
from .runner import (ConfigRun, LLMDirect, llm_reachable, progress, run_llm_direct, run_rerank_config,
                     throwaway_service)

if TYPE_CHECKING:
    from search.embeddings import Embedder

CI_KEYS = ("hit@1", "hit@3", "hit@5", "mrr", "ndcg@10", "r@5")


def case_group(case_category: str | None, gold: Sequence[str], tasks_by_id: dict[str, TaskRecord]) -> str:
    """Per-category breakdown key: the case's category, else its first gold task's catalog
    category (CLINC: the domain), else 'uncategorised'."""
    if case_category:
        return case_category
    for g in gold:
        task = tasks_by_id.get(g)
        if task is not None and task.category:
            return task.category
    return "uncategorised"


def summarise(run: ConfigRun, seed: int, tasks_by_id: dict[str, TaskRecord], baseline: ConfigRun | None,
              operating: dict | None, resamples: int = 1000) -> dict:
    if run.skipped:
        return {"n": 0, "skipped": run.skipped, **{k: None for k in METRIC_KEYS}, "oos_fpr": None,
                "latency_ms_p50": None, "model": run.model}
    in_scope = [r for r in run.rows if r.gold]
    oos = [r for r in run.rows if not r.gold]
    per = [per_query(r.ranking, r.gold) for r in in_scope]
    means = mean_metrics(per)
    out: dict = {"n": len(in_scope), "n_oos": len(oos), **means, "accuracy_rate": means["r@5"]}
    out["precision"] = {f"p@{k}": means[f"p@{k}"] for k in (1, 3, 5)}
    out["recall"] = {f"r@{k}": means[f"r@{k}"] for k in (1, 3, 5)}
    answered_oos = [bool(r.ranking) for r in oos]
    out["oos_fpr_unthresholded"] = float(np.mean(answered_oos)) if oos else None
    if operating is not None:
        out["oos_fpr"] = operating.get("oos_fpr") if oos else None
        out["hit@5_with_threshold"] = operating.get("hit@5")
        out["in_scope_abstain"] = operating.get("in_scope_abstain")
        out["oracle_oos_fpr_at_2pts"] = operating.get("oracle_oos_fpr_at_2pts")
    else:
        out["oos_fpr"] = out["oos_fpr_unthresholded"]
    latencies = [r.latency_ms for r in run.rows]
    out["latency_ms_p50"] = percentile(latencies, 50)
    out["latency_ms_p95"] = percentile(latencies, 95)
    out["ci"] = {k: bootstrap_ci([p[k] for p in per], seed, resamples) for k in CI_KEYS}
    groups: dict[str, list[dict]] = {}
    for r, p in zip(in_scope, per):
        groups.setdefault(case_group(r.category, r.gold, tasks_by_id), []).append(p)
    out["per_category"] = {g: {"n": len(ps), **{k: float(np.mean([p[k] for p in ps]))
                                                for k in ("hit@1", "hit@5", "mrr")}}
                           for g, ps in sorted(groups.items())}
    if baseline is not None and not baseline.skipped and baseline is not run:
        base = {r.query: per_query(r.ranking, r.gold) for r in baseline.rows if r.gold}
        pairs = [(p, base[r.query]) for r, p in zip(in_scope, per) if r.query in base]
        out["p_value_vs_prefilter"] = {
            k: randomisation_test([a[k] for a, _ in pairs], [b[k] for _, b in pairs], seed)
            for k in ("mrr", "hit@1", "hit@5")}
    out["skipped"] = None
    out["model"] = run.model
    if run.notes:
        out["notes"] = run.notes
    return out


# What share of a run each stage takes, measured on the demo catalog (the cross-validation, which
# fits the prototypes once per fold, took 85 % of 264 s); the progress callback reports fractions
# of the whole run.
STAGE_SHARES = {"cross-validating the fit": 0.8, "fitting the ranker": 0.15, "scoring the held-out cases": 0.02,
                "running the configurations": 0.02, "error analysis": 0.01}
ProgressCallback = Callable[[str, float], None]


@dataclass(frozen=True)
class Split:
    """The data of one evaluation: the catalog's tasks, the training cases (the fit, the lexicon
    and the exemplar memory learn from them alone) and the held-out cases it scores; `source`
    says where they came from (the report's `data`)."""

    tasks: Sequence[TaskRecord]
    train: Sequence[CaseRecord]
    test: Sequence[CaseRecord]
    source: dict | None = None


@dataclass(frozen=True)
class Runtime:
    """What an evaluation runs with: the settings, the embedder (None: the sparse signals only) and
    the LLM answers' cache (the rerank and llm_direct configurations)."""

    settings: Settings
    embedder: Embedder | None = None
    cache: object | None = None


@dataclass(frozen=True)
class EvaluationOptions:
    """How one evaluation runs: the seed of its fit's folds, its bootstrap and its significance
    tests; the depth of each ranking; the most CV queries its fit scores (a stable hash sample);
    whether it shows progress bars; the bootstrap's resamples per interval; and
    `on_progress(stage, fraction of the whole run)`, told of each stage as it goes (STAGE_SHARES)."""

    seed: int = 42
    depth: int = 20
    cv_max_queries: int | None = MAX_CV_QUERIES
    show: bool = True
    bootstrap_resamples: int = 1000
    on_progress: ProgressCallback | None = None


@dataclass(frozen=True)
class Replay:
    """The product fitted on the training split, as the replayed configurations rank with it
    (evaluation.replay.run_replay): its pipeline (the held-out index and the fit's parameters),
    its CV queries, and the held-out queries scored once by its index with their latencies."""

    pipeline: Pipeline
    cv: Sequence[CVQuery]
    queries: Sequence[CVQuery]
    millis: Sequence[float]


def stage_progress(on_progress: ProgressCallback | None, stage: str) -> Callable[[float], None]:
    """A reporter for `stage`: fraction-of-the-stage -> on_progress(stage, fraction-of-the-run)."""
    stages = list(STAGE_SHARES)
    start = sum(STAGE_SHARES[name] for name in stages[:stages.index(stage)])

    def report(done: float) -> None:
        if on_progress is not None:
            on_progress(stage, round(start + STAGE_SHARES[stage] * min(max(done, 0.0), 1.0), 4))

    return report


def fit_on_training(context: FitContext, show: bool, on_progress: ProgressCallback | None = None,
                    learned: Sequence[LearnedExemplar] = ()):
    """The product's own per-catalog fit, on the training split only (`context.cases`, its seed
    and CV sample: search.fitting.FitContext): (params, report, CV queries). The context's memo
    keeps the fold indexes, built once for the fit's every CV pass (search.fitting.cv_queries).
    `learned`: exemplars learned from use (search.learned), weighed by the fit as in production."""
    settings, train = context.settings, context.cases
    cv = []
    cross_validating = stage_progress(on_progress, "cross-validating the fit")
    cross_validating(0.0)
    if sum(1 for c in train if c.gold) >= settings.fit_min_cases:
        bar = progress(range(FOLDS), "cv folds", show)

        def fold_done(done: int, total: int) -> None:
            bar.update(1)
            cross_validating(done / total)

        cv = cv_queries(context, CVPass(negatives=abstention_negatives(settings, train), learned=learned),
                        progress=fold_done)
        bar.close()
    stage_progress(on_progress, "fitting the ranker")(0.0)
    params, report = fit_ranker(settings, context.tasks, train, context.embedder, default_params(settings),
                                LearnedInputs(learned, frozenset()),
                                FitOptions(context.seed, context.max_queries, queries=cv or None,
                                           fold_indexes=context.fold_indexes))
    return params, report, cv


def run_config(spec: ConfigSpec, runtime: Runtime, split: Split, replay: Replay, options: EvaluationOptions,
               llm: tuple[bool, str]) -> ConfigRun:
    """One configuration's run over the held-out cases: a replay of the fitted product's rankings
    (`replay`), plain BM25, or the LLM (direct, or re-ranking the product's shortlist through a
    throw-away service); skipped, with the reason, where it needs what is missing."""
    settings, cache, tasks, train, test = runtime.settings, runtime.cache, split.tasks, split.train, split.test
    if spec.needs_embedding and runtime.embedder is None:
        return ConfigRun(spec, skipped="embeddings unavailable (EMBEDDINGS_ENABLED=0 or the embedder failed)")
    if spec.kind in ("fixed", "fitted", "product"):
        return run_replay(spec, replay.pipeline, replay.cv, replay.queries, replay.millis, options.depth)
    if spec.kind == "bm25":
        return run_bm25(spec, tasks, train, test, options.depth)
    if not llm[0]:
        return ConfigRun(spec, skipped=f"no LLM: {llm[1]}")
    if spec.kind == "llm_direct":
        return run_llm_direct(spec, LLMDirect(settings, tasks, cache), test, options.show)
    reranker = Reranker(settings, cache)
    with throwaway_service(settings, tasks, train, runtime.embedder, reranker, replay.pipeline.params) as (_, service):
        return run_rerank_config(spec, service, test, options.depth, options.show, settings.llm_model)


def evaluate(runtime: Runtime, split: Split, configs: Sequence[str], options: EvaluationOptions = EvaluationOptions(),
             learned: Sequence[LearnedExemplar] = ()) -> tuple[dict, dict]:
    """Fit on the training split (CV inside it), score the held-out split with every requested
    configuration, and summarise. Returns (report, artefacts); artefacts hold the per-query runs.
    `options.on_progress(stage, fraction of the whole run)` hears of each stage as it goes
    (STAGE_SHARES). `learned`: exemplars learned from use (the admin evaluation page passes the
    catalog's); those whose query is a held-out test query are left out, so use never answers the
    test itself."""
    settings, embedder, seed, on_progress = runtime.settings, runtime.embedder, options.seed, options.on_progress
    tasks = [t for t in split.tasks if t.active]
    split = replace(split, tasks=tasks)
    train, test = split.train, split.test
    tasks_by_id = {t.id: t for t in tasks}
    wanted = [config_specs(settings.weights)[name] for name in configs]
    needs_llm = any(s.kind in ("rerank", "llm_direct") for s in wanted)
    llm = llm_reachable(settings) if needs_llm else (False, "not requested")

    held_out = {normalised_query(c.query) for c in test}
    learned = tuple(e for e in learned if e.query not in held_out)
    params, fit_report, cv = fit_on_training(FitContext(settings, tasks, train, embedder, seed, options.cv_max_queries),
                                             options.show, on_progress, learned)
    stage_progress(on_progress, "scoring the held-out cases")(0.0)
    index = heldout_index(settings, tasks, train, embedder, params)
    pipeline = replay_pipeline(settings, index, params, embedder)
    queries, millis = heldout_queries(pipeline, test, options.show)
    replay = Replay(pipeline, cv, queries, millis)
    configurations = stage_progress(on_progress, "running the configurations")
    runs = {}
    for position, spec in enumerate(wanted):
        configurations(position / len(wanted))
        runs[spec.name] = run_config(spec, runtime, split, replay, options, llm)
    stage_progress(on_progress, "error analysis")(0.0)

    by_query = {q.case.query: q for q in queries}
    analysis = {name: error_analysis.analyse(pipeline, runs[name].rows, by_query, True)
                for name in ("prefilter", "rerank") if name in runs and not runs[name].skipped}
    baseline = runs.get(BASELINE)
    summaries = {name: summarise(run, seed, tasks_by_id, baseline, abstention_point(run), options.bootstrap_resamples)
                 for name, run in runs.items()}
    report = {
        "configs": summaries,
        "fit": fit_report,
        "data": {**(split.source or {}), "n_tasks": len(tasks), "n_train": len(train), "n_test": len(test),
                 "n_test_in_scope": sum(1 for c in test if c.gold),
                 "n_test_out_of_scope": sum(1 for c in test if not c.gold), "seed": seed, "depth": options.depth,
                 "lexicon_links": len(index.lexicon), "exemplars": len(index.exemplars.texts),
                 "learned_pairs": len(learned),
                 "ranker": {**params.summary(), "weights": params.weights.as_dict()},
                 "embedding_model": embedder.model if embedder is not None else None,
                 "llm_model": settings.llm_model if llm[0] else None, "llm_status": "reachable" if llm[0] else llm[1],
                 "bootstrap_resamples": options.bootstrap_resamples,
                 "significance": "two-sided paired randomisation (sign-flip) test, 10,000 permutations, vs prefilter",
                 "python": platform.python_version()},
        "error_analysis": analysis,
    }
    return report, {"runs": runs, "test": list(test), "tasks_by_id": tasks_by_id}
