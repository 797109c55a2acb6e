"""Measure dead ends through the real HTTP API (issue 43 item 2; evaluation/dead_ends.py).

For each data set: a Flask app (app.create_app) on a temporary SQLite database, its catalog and
training cases imported, fitted as the product fits (`python app.py fit`: SearchService.refit_now),
then every test query sent to /api/search as a whole query (anonymous, k=10, no re-ranking), in
two readings:

    submitted  typing=0: the query is finished (the widget's Enter, a host that submits)
    bare       no typing parameter: the API infers it (a query of at most 8 characters without a
               trailing space reads as still being typed)

and scored: in-scope refused, dead ends (no gold task among the results nor the empty state's
task suggestions), off-topic answered with confident results.

    python ops/measure_dead_ends.py                          # hint3-sofmattress and CLINC150 val
    python ops/measure_dead_ends.py --data hint3 --json out.json
    python ops/measure_dead_ends.py --data clinc150 --variant 'two:limit=2' --variant 'nobar:min_score=-1e9'

Data (../shared/data): hint3-sofmattress (catalog.jsonl; train.jsonl to learn from; test.jsonl,
real traffic with its off-topic queries, to send); CLINC150 (train WITHOUT oos_train, so the fit
has no written negative; val + oos_val to send). `--variant LABEL:name=value,...` repeats the
sends on the same fit with the empty state's suggestions made by search.suggestions.suggest with
those keyword arguments (`limit`: task chips; `min_score`: the fused-score bar); the answer cache
is off so that each variant is answered afresh. The embedding cache is the usual one (CACHE_DIR),
so a second run embeds nothing (the first run of CLINC150 embeds its 15,000 training queries).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Callable
from unittest.mock import patch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from catalog.formats import load_cases_file, load_tasks_file  # noqa: E402
from evaluation import clinc150  # noqa: E402
from evaluation.dead_ends import dead_end_score, outcome_of  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
READINGS = {"submitted": {"typing": "0"}, "bare": {}}


def hint3(directory: Path):
    """(tasks, training cases, test cases) of HINT3 SOFMattress."""
    tasks = load_tasks_file(directory / "catalog.jsonl")
    ids = {t.id for t in tasks}
    return tasks, load_cases_file(directory / "train.jsonl", ids), load_cases_file(directory / "test.jsonl", ids)


def clinc(directory: Path):
    """(tasks, training cases without oos_train, val + oos_val) of CLINC150."""
    data = clinc150.load(directory)
    return data.tasks, [c for c in data.train if c.gold], data.test


SETS = {"hint3": ("hint3-sofmattress", hint3), "clinc150": ("clinc150", clinc)}


def parse_variant(text: str) -> tuple[str, dict]:
    """"label:name=value,name=value" -> (label, {name: value}): keyword arguments of
    search.suggestions.suggest (numbers as numbers)."""
    label, _, assignments = text.partition(":")
    pairs = dict(item.split("=", 1) for item in assignments.split(",") if item.strip())
    return label, {name: json.loads(value) for name, value in pairs.items()}


@contextmanager
def suggesting(kwargs: dict):
    """The service's empty-state suggestions made with `kwargs` for suggest() (a variant), or as
    shipped (no kwargs): the tool replaces the name serving.service calls, nothing else."""
    if not kwargs:
        yield
        return
    import serving.service
    from search.suggestions import suggest

    with patch.object(serving.service, "suggest", partial(suggest, **kwargs)):
        yield


def send_all(client, test, ids_by_name, params: dict) -> tuple[dict, list[dict]]:
    """Every test query through /api/search; (the score, one row per query)."""
    outcomes, rows = [], []
    for case in test:
        body = client.get("/api/search", query_string={"q": case.query, **params}).get_json()
        outcome = outcome_of(case.gold, body, ids_by_name)
        outcomes.append(outcome)
        rows.append({"query": case.query, "gold": list(case.gold), "results": list(outcome.results[:3]),
                     "suggestions": body.get("suggestions"), "no_confident_match": body.get("no_confident_match"),
                     "dead_end": outcome.dead_end, "confidence": body.get("ranker", {}).get("confidence"), **({k: body[k] for k in ("empty_state",) if k in body}),
                     "completions": [c["text"] for c in body.get("completions") or ()][:3]})
    return dead_end_score(outcomes).as_dict(), rows


def measure(name: str, directory: Path, variants: list[tuple[str, dict]], detail: Path | None,
            save: Callable[[dict], None] = lambda partial: None) -> dict:
    """The readings and variants of one data set on one fitted temporary app; `save` gets the
    figures so far after each run (a long run killed half-way keeps what it measured)."""
    tasks, train, test = SETS[name][1](directory)
    with tempfile.TemporaryDirectory(prefix="taskfinder-dead-ends-") as tmp:
        os.environ.update(DATABASE_URL=f"sqlite:///{tmp}/dead_ends.db", ANALYTICS_ENABLED="0", RATE_LIMITS="0",
                          AUTO_FIT="0", ANSWER_CACHE_SIZE="0")
        from app import create_app
        from catalog import db
        from settings import Settings

        app = create_app(Settings.from_env())
        services = app.extensions["taskfinder"]
        db.upgrade(services.store.engine)
        services.store.import_tasks(list(tasks), message=f"dead ends: {name} catalog")
        services.store.import_cases(list(train), message=f"dead ends: {name} training cases")
        started = time.perf_counter()
        fit = services.search.refit_now()
        services.search.live(wait=True)
        fit_s = round(time.perf_counter() - started, 1)
        ids_by_name: dict[str, list[str]] = defaultdict(list)
        for task in tasks:
            ids_by_name[task.name].append(task.id)
        client = app.test_client()
        out = {"data": str(directory), "tasks": len(tasks), "train": len(train), "test": len(test),
               "fit": {"status": fit.get("status"), "seconds": fit_s,
                       "thresholds": {mode: model.threshold for mode, model in
                                      services.search.live().params.abstention.items() if model is not None}},
               "runs": {}}
        for label, kwargs in [("as shipped", {}), *variants]:
            for reading, params in READINGS.items():
                started = time.perf_counter()
                with suggesting(kwargs):
                    score, rows = send_all(client, test, ids_by_name, params)
                key = f"{label} / {reading}"
                out["runs"][key] = {**score, "seconds": round(time.perf_counter() - started, 1), "suggest": kwargs}
                print(f"{name} {key}: {json.dumps(score)}", file=sys.stderr, flush=True)
                save(out)
                if detail is not None:
                    detail.mkdir(parents=True, exist_ok=True)
                    safe = "".join(ch if ch.isalnum() else "_" for ch in key)
                    (detail / f"{name}_{safe}.jsonl").write_text(
                        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", choices=sorted(SETS), action="append", help="data set(s); default: both")
    parser.add_argument("--data-dir", type=Path, default=DATA, help="holds hint3-sofmattress/ and clinc150/")
    parser.add_argument("--variant", action="append", default=[],
                        help="LABEL:name=value,... keyword arguments of search.suggestions.suggest")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--detail", type=Path, default=None, help="write one JSONL of answers per run here")
    args = parser.parse_args(argv)
    variants = [parse_variant(v) for v in args.variant]
    result: dict = {}

    def save(name: str, partial: dict) -> None:
        result[name] = partial
        if args.json is not None:
            args.json.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    for name in args.data or sorted(SETS, reverse=True):
        save(name, measure(name, args.data_dir / SETS[name][0], variants, args.detail, partial(save, name)))
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
