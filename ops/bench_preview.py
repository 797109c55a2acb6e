"""Latency benchmark of the admin ranking preview (admin.preview) on the demo catalog.

    python ops/bench_preview.py [--runs 7] [--workdir DIR] [--json FILE]

Loads the demo catalog and test cases into a SQLite database under --workdir (default:
instance/bench-preview, kept between runs together with its embedding cache), fits the ranker
once (about two minutes on 2 cores, only on the first run), then times `preview_change` for
three typical edits: a new test case, a test case whose gold moves to another task, and a no-op;
then an editor's next previews through the memo the admin keeps (a new case each).
The first preview of each edit warms the embedding cache (a new case's query is embedded once,
as the editor's first preview would); the reported figure is the median of the following runs.
Embeddings on (the bundled e5), no LLM. Wall-clock and CPU time are both reported: on a
shared machine the wall clock also measures the other processes (the load average is printed).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import diskcache  # noqa: E402

from catalog import db  # noqa: E402
from catalog.demo import DEMO_CASES, DEMO_CATALOG  # noqa: E402
from catalog.formats import load_cases_file, load_tasks_file  # noqa: E402
from catalog.records import CaseRecord  # noqa: E402
from catalog.store import CatalogStore  # noqa: E402
from infra.metrics import Metrics  # noqa: E402
from search.embeddings import build_embedder  # noqa: E402
from admin.preview import preview_change  # noqa: E402
from evaluation.impact import ImpactMemo  # noqa: E402
from serving.service import SearchService  # noqa: E402
from settings import PROJECT_ROOT, Settings  # noqa: E402


def edits(tasks, cases) -> dict[str, tuple[list, list]]:
    """name -> (after_cases, edited queries) for three typical edits of the demo."""
    new_case = CaseRecord(query="check a child's growth chart", gold=("health.growth-bmi",),
                          rationale="Growth is tracked by height and weight measurements (BMI).", category="synonym")
    moved = cases[10]
    other = next(t.id for t in tasks if t.id not in moved.gold)
    return {
        "add a case": ([*cases, new_case], [new_case.query]),
        "move a case's gold": ([replace(c, gold=(other,)) if c is moved else c for c in cases], [moved.query]),
        "no-op": (list(cases), [cases[0].query]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--workdir", type=Path, default=PROJECT_ROOT / "instance" / "bench-preview")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    args.workdir.mkdir(parents=True, exist_ok=True)
    settings = Settings.from_env().with_overrides(data_dir=args.workdir,
                                                  database_url=f"sqlite:///{args.workdir / 'bench.db'}",
                                                  cache_path=args.workdir / "cache", auto_fit=False)
    store = CatalogStore(db.make_engine(settings.database))
    db.upgrade(store.engine)
    if not store.tasks():
        store.import_tasks(load_tasks_file(DEMO_CATALOG))
        tasks = store.tasks()
        store.import_cases(load_cases_file(DEMO_CASES, {t.id for t in tasks}))
    embedder = build_embedder(settings, diskcache.Cache(str(settings.cache_dir)))
    service = SearchService(settings, store, embedder, None, Metrics())
    live = service.live(wait=True)
    if store.latest_fit() is None:
        print("fitting the ranker once (kept in the work directory) ...", flush=True)
        print(service.refit(live).get("status"))
        live = service.live(wait=True)
    tasks, cases = store.tasks(include_inactive=True), store.cases()

    results = {}
    for name, (after_cases, queries) in edits(tasks, cases).items():
        preview_change(service, tasks, cases, tasks, after_cases, queries)   # warm-up
        samples, cpu = [], []
        for _ in range(args.runs):
            start, start_cpu = time.perf_counter(), time.process_time()
            report = preview_change(service, tasks, cases, tasks, after_cases, queries)
            samples.append((time.perf_counter() - start) * 1000.0)
            cpu.append((time.process_time() - start_cpu) * 1000.0)
        results[name] = {"median_ms": round(statistics.median(samples), 1), "min_ms": round(min(samples), 1),
                         "max_ms": round(max(samples), 1), "cpu_median_ms": round(statistics.median(cpu), 1),
                         "runs": args.runs, "mode": report.mode,
                         "changed_cases": len(report.changed_cases), "links_added": len(report.links_added),
                         "cv_hit@5": [report.cv_before.hit_at_5, report.cv_after.hit_at_5]}
        print(f"{name:20s} median {results[name]['median_ms']:8.1f} ms  (min {results[name]['min_ms']}, "
              f"max {results[name]['max_ms']}; CPU median {results[name]['cpu_median_ms']} ms; {report.mode}; "
              f"{len(report.changed_cases)} changed cases; "
              f"CV Hit@5 {report.cv_before.hit_at_5} -> {report.cv_after.hit_at_5})", flush=True)
    # An editor's next previews against the same live catalog, through the memo the admin keeps
    # (evaluation.impact.ImpactMemo): each a different new case, after a first one filled the memo.
    memo = ImpactMemo()
    added = [CaseRecord(query=f"check a child's growth chart {n}", gold=("health.growth-bmi",)) for n in range(args.runs + 1)]
    preview_change(service, tasks, cases, tasks, [*cases, added[0]], [added[0].query], memo=memo)
    samples, cpu = [], []
    for case in added[1:]:
        start, start_cpu = time.perf_counter(), time.process_time()
        preview_change(service, tasks, cases, tasks, [*cases, case], [case.query], memo=memo)
        samples.append((time.perf_counter() - start) * 1000.0)
        cpu.append((time.process_time() - start_cpu) * 1000.0)
    results["next preview, memo"] = {"median_ms": round(statistics.median(samples), 1),
                                     "cpu_median_ms": round(statistics.median(cpu), 1), "runs": args.runs}
    print(f"{'next preview, memo':20s} median {results['next preview, memo']['median_ms']:8.1f} ms  "
          f"(CPU median {results['next preview, memo']['cpu_median_ms']} ms; a new case each, same live catalog)",
          flush=True)
    summary = {"ranker": live.params.summary(), "tasks": len(tasks), "cases": len(cases), "results": results,
               "load_average": os.getloadavg()}
    print(f"load average during the run: {summary['load_average'][0]:.1f} (1 min) on {os.cpu_count()} CPUs")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
