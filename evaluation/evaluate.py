"""One evaluation run: configurations x held-out cases -> metrics, CIs, significance, threshold,
error analysis (and optionally weight tuning). The report dict is what `--json` writes.
"""
from __future__ import annotations

import platform
from typing import Sequence

import numpy as np

from catalog.records import CaseRecord, TaskRecord
from rerank import Reranker
from settings import Settings

from . import errors as error_analysis
from . import threshold as thresholds
from .configs import BASELINE, DETERMINISTIC, ConfigSpec, config_specs
from .cv import cv_blocks
from .fastrank import embedding_texts, signal_block
from .metrics import METRIC_KEYS, bootstrap_ci, mean_metrics, per_query, percentile, randomisation_test
from .runner import (ConfigRun, LLMDirect, embed_queries, llm_reachable, progress, run_llm_direct,
                     run_prefilter_config, run_rerank_config, throwaway_service)
from .tuning import tune as tune_weights

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
        out["threshold"] = operating.get("threshold")
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


def evaluate(settings: Settings, tasks: Sequence[TaskRecord], train: Sequence[CaseRecord],
             test: Sequence[CaseRecord], embedder, cache, configs: Sequence[str], seed: int = 42,
             depth: int = 20, folds: int = 5, do_tune: bool = False, cv_max_queries: int | None = 2000,
             show: bool = True, data: dict | None = None, bootstrap_resamples: int = 1000,
             max_hit_loss: float = 0.02) -> tuple[dict, dict]:
    """Returns (report, artefacts); artefacts hold the per-query runs for files and charts."""
    tasks = [t for t in tasks if t.active]
    tasks_by_id = {t.id: t for t in tasks}
    specs = config_specs(settings.weights)
    wanted = [specs[name] for name in configs]
    llm_wanted = [s for s in wanted if s.kind != "prefilter"]
    llm_ok, llm_why = llm_reachable(settings) if llm_wanted else (False, "")
    reranker = Reranker(settings, cache) if llm_ok and any(s.kind == "rerank" for s in wanted) else None

    runs: dict[str, ConfigRun] = {}
    blocks = {}
    with throwaway_service(settings, tasks, train, embedder, reranker) as (store, service):
        live = service.live()
        if live.vectors_ok:
            embed_queries(embedder, embedding_texts(live.index, [c.query for c in test], settings.typo_min_similarity),
                          show)
        store_cases = len(store.cases())
        for spec in wanted:
            if spec.kind == "prefilter":
                runs[spec.name] = run_prefilter_config(spec, service, test, depth, show)
            elif not llm_ok:
                runs[spec.name] = ConfigRun(spec, skipped=f"no LLM: {llm_why}")
            elif spec.kind == "rerank":
                runs[spec.name] = run_rerank_config(spec, service, test, depth, show, settings.llm_model)
            else:
                runs[spec.name] = run_llm_direct(spec, LLMDirect(settings, tasks, cache), test, show)
        for case in progress(test, "signals for error analysis", show):
            blocks[case.query] = signal_block(live.index, case.query, embedder, settings.typo_min_similarity)
        analysis = {}
        for name in ("prefilter", "rerank"):
            run = runs.get(name)
            if run is not None and not run.skipped:
                analysis[name] = error_analysis.analyse(live.index, run.rows, blocks, settings.weights, True,
                                                        settings.shortlist_size, settings.typo_min_similarity)
        lexicon_links = len(live.index.lexicon)

    # --- threshold ("no confident match") and tuning: CV inside the training split only ---
    need_cv = do_tune or any(s.kind == "prefilter" for s in wanted)
    cv = cv_blocks(settings, tasks, train, embedder, folds, seed, cv_max_queries, show) if need_cv else []
    fitted: dict[str, thresholds.Threshold] = {}
    operating: dict[str, dict] = {}
    curves: dict[str, dict] = {}
    for spec in wanted:
        run = runs[spec.name]
        if run.skipped or spec.kind != "prefilter":
            continue
        samples = thresholds.samples_from_cv(cv, spec.weights, spec.pins)
        fitted[spec.name] = th = thresholds.fit(samples, max_hit_loss)
        operating[spec.name] = thresholds.apply(run.rows, th)
        if spec.name in ("prefilter",) and th.feature is not None:
            curves[spec.name] = {"feature": th.feature, "value": th.value,
                                 "cv": thresholds.curve(samples, th.feature),
                                 "test": thresholds.curve(thresholds.samples_of_rows(run.rows), th.feature)}
    if "rerank" in runs and not runs["rerank"].skipped and "prefilter" in fitted:
        # the product applies MIN_CONFIDENCE to the prefilter before re-ranking: same decisions
        decisions = {r.query: r for r in runs["prefilter"].rows}
        th = fitted["prefilter"]
        rows = runs["rerank"].rows
        for r in rows:
            base = decisions[r.query]
            r.features, r.extra["pinned"] = base.features, base.extra.get("pinned")
        operating["rerank"] = thresholds.apply(rows, th)

    baseline = runs.get(BASELINE)
    summaries = {name: summarise(run, seed, tasks_by_id, baseline, operating.get(name), bootstrap_resamples)
                 for name, run in runs.items()}
    for name, th in fitted.items():
        summaries[name]["min_confidence"] = th.as_dict()

    report = {
        "configs": summaries,
        "data": {
            **(data or {}),
            "n_tasks": len(tasks),
            "n_train": len(train),
            "n_test": len(test),
            "n_test_in_scope": sum(1 for c in test if c.gold),
            "n_test_out_of_scope": sum(1 for c in test if not c.gold),
            "seed": seed,
            "depth": depth,
            "store_cases": store_cases,
            "lexicon_links": lexicon_links,
            "weights": {s.name: s.weights_row() for s in wanted},
            "product_weights": specs["prefilter"].weights_row(),
            "shortlist_size": settings.shortlist_size,
            "embedding_model": embedder.model if embedder is not None else None,
            "llm_model": settings.llm_model if llm_ok else None,
            "llm_status": "reachable" if llm_ok else (llm_why or "not requested"),
            "bootstrap_resamples": bootstrap_resamples,
            "significance": "two-sided paired randomisation (sign-flip) test, 10,000 permutations, vs prefilter",
            "cv": {"folds": folds, "max_queries": cv_max_queries, "n_queries": len(cv)},
            "python": platform.python_version(),
        },
        "min_confidence": fitted["prefilter"].as_dict() if "prefilter" in fitted else None,
        "error_analysis": analysis,
    }
    if do_tune:
        report["tuning"] = tune_weights(cv, settings.weights, depth,
                                        lambda it: progress(it, "tuning grid", show, total=len(it)))
    artefacts = {"runs": runs, "curves": curves, "test": list(test), "tasks_by_id": tasks_by_id}
    return report, artefacts
