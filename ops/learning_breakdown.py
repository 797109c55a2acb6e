"""What a traffic simulation taught, phrasing by phrasing (docs/learning-from-use.md, section 5).

    python ops/learning_breakdown.py --data-dir DIR --clinc150 ../shared/data/clinc150 \\
        [--cache-dir cache] [--taus 0.86,0.88,0.90,0.92,0.94]

DIR is an `ops/simulate_traffic.py --data-dir` run (the same --max-per-intent, --pool-per-intent
and --seed). It reads that run's `learned_evidence` and prints, as JSON:

* `phrasings`: each traffic phrasing in one class: counted (its right task is an eligible pair),
  never searched, right task never shown (in the widget's list), shown and never clicked, fewer
  than LEARNING_MIN_SESSIONS sessions or LEARNING_MIN_NETWORKS networks, relevance too low;
* `pooling`: what pooling support across near-identical queries would add. A pair short only
  of support borrows the distinct sessions and networks (a union of their sketches, so nobody
  counts twice) of the same task's pairs whose queries are within e5 cosine tau of it; counted
  are the pairs it would make eligible on the phrasing's right task and on a wrong one, with the
  written cases' cross-task cosine percentiles beside them to read tau against.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python ops/learning_breakdown.py", description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--clinc150", required=True)
    parser.add_argument("--max-per-intent", type=int, default=2)
    parser.add_argument("--pool-per-intent", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--cache-dir", default=str(ROOT / "cache"))
    parser.add_argument("--taus", default="0.86,0.88,0.90,0.92,0.94")
    args = parser.parse_args(argv)

    import diskcache
    from sqlalchemy import select

    from analytics.learning_models import LearnedEvidence
    from catalog import db
    from ops.simulate_traffic import clinc_setup
    from search.embeddings import CachedEmbedder, LocalE5Embedder
    from search.learned import eligible as learned_eligible
    from search.learned import normalised_query, sketch_count, sketch_union
    from settings import Settings

    settings = Settings.from_env({"TASKFINDER_DATA_DIR": args.data_dir})
    engine = db.make_engine(settings.database)
    with engine.connect() as connection:
        rows = list(connection.execute(select(LearnedEvidence.__table__)))
    tasks, cases, pool, _ = clinc_setup(Path(args.clinc150), args.max_per_intent, args.pool_per_intent, args.seed)
    need_s, need_n, need_p, need_r = (settings.learning_min_sessions, settings.learning_min_networks,
                                      settings.learning_min_people, settings.learning_min_relevance)

    def eligible(sessions: int, networks: int, relevance: float, people: int) -> bool:
        """The product's own rule (search.learned.eligible) for these counts."""
        pair = SimpleNamespace(query="", task_id="", sessions=sessions, networks=networks, relevance=relevance,
                               people=people)
        return bool(learned_eligible([pair], need_s, need_r, min_networks=need_n, min_people=need_p))

    by_pair = {(r.query, r.task_id): r for r in rows}
    searched = {r.query for r in rows}
    classes = dict.fromkeys(("counted", "never searched", "right task never shown", "shown, never clicked",
                             "too few sessions or networks", "relevance too low"), 0)
    for query, gold in pool:
        key = normalised_query(query)
        row = by_pair.get((key, gold))
        if key not in searched:
            classes["never searched"] += 1
        elif row is None:
            classes["right task never shown"] += 1
        elif eligible(row.sessions, row.networks, row.relevance, row.people):
            classes["counted"] += 1
        elif row.clicks == 0:
            classes["shown, never clicked"] += 1
        elif row.sessions < need_s or row.networks < need_n:
            classes["too few sessions or networks"] += 1
        else:
            classes["relevance too low"] += 1

    gold_of: dict[str, set[str]] = {}
    for query, gold in pool:
        gold_of.setdefault(normalised_query(query), set()).add(gold)
    embedder = CachedEmbedder(LocalE5Embedder(), diskcache.Cache(args.cache_dir))
    queries = sorted(searched)
    vectors = embedder.embed(queries, "query")
    at = {q: i for i, q in enumerate(queries)}
    written = embedder.embed([c.query for c in cases], "query")
    owners = np.array([c.gold[0] for c in cases])
    upper = np.triu_indices(len(cases), 1)
    cross = (written @ written.T)[upper][owners[upper[0]] != owners[upper[1]]]
    by_task: dict[str, list] = {}
    for r in rows:
        if r.relevance >= need_r:
            by_task.setdefault(r.task_id, []).append(r)
    pooling = []
    for tau in (float(t) for t in args.taus.split(",")):
        right = wrong = 0
        for r in rows:
            if r.relevance < need_r or eligible(r.sessions, r.networks, r.relevance, r.people):
                continue
            sessions, networks = r.session_sketch, r.network_sketch
            for other in by_task[r.task_id]:
                if other.query != r.query and float(vectors[at[r.query]] @ vectors[at[other.query]]) >= tau:
                    sessions = sketch_union(sessions, other.session_sketch)
                    networks = sketch_union(networks, other.network_sketch)
            if eligible(sketch_count(sessions), sketch_count(networks), r.relevance, r.people):
                right += r.task_id in gold_of.get(r.query, ())
                wrong += r.task_id not in gold_of.get(r.query, ())
        pooling.append({"tau": tau, "right": right, "wrong": wrong})
    counted = [r for r in rows if eligible(r.sessions, r.networks, r.relevance, r.people)]
    print(json.dumps({
        "pool": len(pool), "phrasings": classes,
        "eligible_pairs": len(counted),
        "eligible_on_a_wrong_task": sum(r.task_id not in gold_of.get(r.query, ()) for r in counted),
        "written_cross_task_cosine": {f"p{p}": round(float(np.percentile(cross, p)), 4) for p in (90, 99, 99.9)},
        "pooling": pooling}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
