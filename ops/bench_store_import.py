"""Latency of importing the demo catalog into an empty store, and of a restart's migration check.

    python ops/bench_store_import.py [--runs 7] [--postgres URL | --no-postgres]

For each database (a new SQLite file; a new schema of the PostgreSQL database at --postgres,
127.0.0.1:5432/test by default, skipped where it cannot be reached): a migrated, empty store,
then `import_tasks` of the demo's 200 tasks and `import_cases` of its 258 cases, timed together;
the median of --runs fresh stores. Then `catalog.db.upgrade` of a store already at the newest
migration (what every server start and `app.py` command runs), the median of 20 calls. Then
`add_task` (median of 5) on that store with the demo imported, after 1,000 edits of its cases, and
after 20 re-imports of its tasks: what a long history costs an editor (design/editor.md).
Wall-clock medians in ms; the load average is printed (a shared machine's other work is in them).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy.exc import OperationalError  # noqa: E402

from catalog import db  # noqa: E402
from catalog.demo import DEMO_CASES, DEMO_CATALOG  # noqa: E402
from catalog.formats import load_cases_file, load_tasks_file  # noqa: E402
from catalog.records import TaskRecord  # noqa: E402
from catalog.store import CatalogStore  # noqa: E402
from ops.bench_analytics import database  # noqa: E402  (a fresh migrated database of either kind)

POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def measure(url: str | None, runs: int, tasks, cases) -> dict:
    """On fresh migrated databases (ops.bench_analytics.database: a SQLite file for None, else a
    new schema of the PostgreSQL database at `url`)."""
    imports, checks = [], []
    for _ in range(runs):
        with database(url) as engine:
            store = CatalogStore(engine)
            start = time.perf_counter()
            store.import_tasks(tasks)
            store.import_cases(cases)
            imports.append((time.perf_counter() - start) * 1000.0)
    with database(url) as engine:
        for _ in range(20):
            start = time.perf_counter()
            db.upgrade(engine)
            checks.append((time.perf_counter() - start) * 1000.0)
        adds = add_task_with_history(CatalogStore(engine), tasks, cases)
    return {"import_ms": round(statistics.median(imports), 1), "upgrade_at_head_ms": round(statistics.median(checks), 2),
            "add_task_ms": adds}


def add_task_with_history(store: CatalogStore, tasks, cases) -> list[float]:
    """Median ms of 5 add_task calls: on the demo just imported, after 1,000 case edits, after 20
    re-imports of every task."""
    store.import_tasks(tasks)
    store.import_cases(cases)
    out = []

    def adds(stage: int) -> None:
        samples = []
        for n in range(5):
            start = time.perf_counter()
            store.add_task(TaskRecord(id=f"bench.{stage}.{n}", name=f"Bench task {stage} {n}", category="bench"))
            samples.append((time.perf_counter() - start) * 1000.0)
        out.append(round(statistics.median(samples), 1))

    adds(0)
    held = store.cases()
    for n in range(1000):
        case = store.case(held[n % len(held)].id)
        store.update_case(case.id, case.version, replace(case, rationale=f"edit {n}"))
    adds(1)
    for n in range(20):
        store.import_tasks([replace(task, help=f"{task.help} ({n})") for task in tasks])
    adds(2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--postgres", default=os.environ.get("TEST_POSTGRES_URL", POSTGRES))
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    tasks = load_tasks_file(DEMO_CATALOG)
    cases = load_cases_file(DEMO_CASES, {t.id for t in tasks})
    figures = measure(None, args.runs, tasks, cases)
    print(f"sqlite      import of the demo ({len(tasks)} tasks, {len(cases)} cases) median {figures['import_ms']} ms; "
          f"upgrade at head median {figures['upgrade_at_head_ms']} ms; add_task {figures['add_task_ms']} ms "
          "(new / after 1,000 edits / after 20 re-imports)")
    if not args.no_postgres:
        try:
            figures = measure(args.postgres, args.runs, tasks, cases)
        except OperationalError as exc:
            print(f"postgresql  skipped: {str(exc).splitlines()[0]}")
        else:
            print(f"postgresql  import of the demo median {figures['import_ms']} ms; "
                  f"upgrade at head median {figures['upgrade_at_head_ms']} ms; add_task {figures['add_task_ms']} ms")
    print(f"load average: {os.getloadavg()[0]:.2f} (1 min) on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
