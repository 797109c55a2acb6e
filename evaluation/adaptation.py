"""Adaptation to new terminology (paper §4.7).

Five new tasks with unfamiliar acronyms (evaluation/data/adaptation/tasks.jsonl) join the
catalog; 15 plain-language queries about them (queries.jsonl) are ranked

    before: lexicon from the training split only (the new tasks have no test case yet)
    after:  the same plus 2-3 teaching test cases per new task (teaching.jsonl)

and Hit@5 / MRR are compared, together with the held-out split's Hit@5 (the new cases must not
hurt the existing queries). No teaching query shares its term set with an evaluated query, so
the pins of the teaching cases never answer an evaluated query directly.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from catalog.formats import load_cases_file, load_tasks_file
from catalog.records import CaseRecord, TaskRecord
from lexicon.text import terms
from search.fitting import MAX_CV_QUERIES, FitContext
from settings import Settings

from .configs import config_specs
from .metrics import per_query
from .replay import heldout_index, heldout_queries, replay_pipeline, run_replay

if TYPE_CHECKING:
    from .evaluate import Split

DATA_DIR = Path(__file__).resolve().parent / "data" / "adaptation"


def load_fixture(directory: Path = DATA_DIR) -> tuple[list[TaskRecord], list[CaseRecord], list[CaseRecord]]:
    tasks = load_tasks_file(directory / "tasks.jsonl")
    ids = {t.id for t in tasks}
    queries = load_cases_file(directory / "queries.jsonl", ids)
    teaching = load_cases_file(directory / "teaching.jsonl", ids)
    clash = {frozenset(terms(c.query)) for c in queries} & {frozenset(terms(c.query)) for c in teaching}
    if clash:
        raise ValueError(f"teaching queries repeat evaluated queries' terms: {sorted(map(sorted, clash))}")
    return tasks, queries, teaching


def _score(rows) -> dict:
    per = [per_query(r.ranking, r.gold) for r in rows if r.gold]
    return {"n": len(per), "hit@1": float(np.mean([p["hit@1"] for p in per])),
            "hit@5": float(np.mean([p["hit@5"] for p in per])), "mrr": float(np.mean([p["mrr"] for p in per]))}


def run(settings: Settings, split: Split, embedder, show: bool = False, directory: Path = DATA_DIR,
        config: str = "prefilter") -> dict:
    """New tasks and their plain-language queries, before and after adding teaching cases. The
    ranker is fitted once on `split.train` (the teaching cases take effect through the lexicon,
    pins and exemplar memory at once, before any refit); `split.test`'s in-scope cases measure
    what the new tasks cost the existing queries."""
    from .evaluate import fit_on_training

    tasks, train, test = split.tasks, split.train, split.test

    new_tasks, queries, teaching = load_fixture(directory)
    known = {t.id for t in tasks}
    clash = [t.id for t in new_tasks if t.id in known]
    if clash:
        raise ValueError(f"adaptation task ids already in the catalog: {clash}")
    catalog = [*tasks, *new_tasks]
    spec = config_specs(settings.weights)[config]
    params, _, cv = fit_on_training(FitContext(settings, tasks, train, embedder, 42, MAX_CV_QUERIES), show)
    held = [c for c in test if c.gold]

    def rows(catalog_tasks, cases, evaluated):
        pipeline = replay_pipeline(settings, heldout_index(settings, catalog_tasks, cases, embedder, params), params,
                                   embedder)
        scored, millis = heldout_queries(pipeline, evaluated)
        return run_replay(spec, pipeline, cv, scored, millis, 20).rows

    out: dict = {"config": config, "new_tasks": [t.name for t in new_tasks], "n_queries": len(queries),
                 "n_teaching_cases": len(teaching)}
    for label, cases in (("before", list(train)), ("after", [*train, *teaching])):
        new_rows = rows(catalog, cases, queries)
        out[label] = {"new_queries": _score(new_rows), "held_out": _score(rows(catalog, cases, held)),
                      "misses": [r.query for r in new_rows if not set(r.gold) & set(r.ranking[:5])]}
    # the existing catalog without the new tasks, for the paper's "drop" comparison
    out["held_out_without_new_tasks"] = _score(rows(tasks, train, held))
    return out


def markdown(result: dict, command: str | None = None) -> str:
    b, a = result["before"], result["after"]
    lines = ["## Adaptation to new terminology (paper 4.7)", ""]
    if command:
        lines += ["```", command, "```", ""]
    lines += [f"New tasks: {', '.join(result['new_tasks'])}; {result['n_queries']} plain-language queries about them; "
              f"{result['n_teaching_cases']} teaching test cases. Configuration: `{result['config']}`.", "",
              "| | new-task Hit@1 | new-task Hit@5 | new-task MRR | held-out Hit@5 |", "|---|---|---|---|---|",
              f"| held-out, catalog without new tasks | - | - | - | {result['held_out_without_new_tasks']['hit@5']:.3f} |",
              f"| before teaching cases | {b['new_queries']['hit@1']:.3f} | {b['new_queries']['hit@5']:.3f} | "
              f"{b['new_queries']['mrr']:.3f} | {b['held_out']['hit@5']:.3f} |",
              f"| after teaching cases | {a['new_queries']['hit@1']:.3f} | {a['new_queries']['hit@5']:.3f} | "
              f"{a['new_queries']['mrr']:.3f} | {a['held_out']['hit@5']:.3f} |", "",
              f"Still missed after teaching: {', '.join(f'`{q}`' for q in a['misses']) or 'none'}.", ""]
    return "\n".join(lines)
