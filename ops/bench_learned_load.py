"""What the admin pays to read the learned evidence (analytics.learning.load_learned): the whole
table (the dashboard's "queries nobody clicks") and one task's queries (the editor's panel).

    python ops/bench_learned_load.py [--queries 6000] [--tasks-per-query 5] [--rounds 7]

Fills a migrated SQLite database with queries x tasks-per-query synthetic learned_evidence rows
(each with its four distinct-count sketches, as the aggregation writes them; 30,000 rows by
default, about what 100,000 logged searches leave: ops/bench_scale.py --learned-searches) and
prints the median CPU seconds of each read.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=6000)
    parser.add_argument("--tasks-per-query", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)

    from sqlalchemy import create_engine, insert

    from analytics.learning import load_learned
    from analytics.learning_models import LearnedEvidence
    from search.learned import sketch_of

    directory = tempfile.mkdtemp()
    url = f"sqlite:///{directory}/learned.db"
    subprocess.run([sys.executable, str(ROOT / "app.py"), "db", "upgrade"], check=True, capture_output=True,
                   env={**os.environ, "DATABASE_URL": url, "TASKFINDER_DATA_DIR": directory})
    engine = create_engine(url)
    rnd, now = random.Random(1), datetime.now(timezone.utc)

    def sketch(n: int) -> bytes:
        return sketch_of([f"key-{rnd.random()}" for _ in range(n)])

    rows = [dict(query=f"query {q}", task_id=f"t{t}", sessions=2, clicks=1, examinations=1.0, relevance=0.3,
                 updated_at=now, networks=1, people=0, rephrased_clicks=0, session_sketch=sketch(2),
                 viewer_sketch=sketch(4), viewer_network_sketch=sketch(2), viewer_people_sketch=sketch(1))
            for q in range(args.queries) for t in rnd.sample(range(150), args.tasks_per_query)]
    with engine.begin() as connection:
        connection.execute(insert(LearnedEvidence.__table__), rows)
    for name, read in (("whole table", lambda: load_learned(engine)),
                       ("one task", lambda: load_learned(engine, "t7"))):
        seconds = []
        for _ in range(args.rounds):
            start = time.process_time()
            found = read()
            seconds.append(time.process_time() - start)
        print(f"{name}: {len(found)} rows, {statistics.median(seconds):.3f} s CPU (median of {args.rounds})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
