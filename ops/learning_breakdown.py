"""What a traffic simulation taught, phrasing by phrasing (docs/learning-from-use.md, section 5).

    python ops/learning_breakdown.py --data-dir DIR --clinc150 ../shared/data/clinc150 \\
        [--cache-dir cache] [--taus 0.86,0.88,0.90,0.92,0.94]

DIR is an `ops/simulate_traffic.py --data-dir` run (the same --max-per-intent, --pool-per-intent
and --seed). It reads that run's `learned_evidence` and prints, as JSON:

* `phrasings`: each traffic phrasing in one class: counted (its right task is an eligible pair),
  never searched, right task never shown (in the widget's list), shown and never clicked, fewer
  than LEARNING_MIN_SESSIONS sessions (and not its query's majority: LEARNING_MAJORITY_SESSIONS)
  or LEARNING_MIN_NETWORKS networks, relevance too low;
* `by_support`: the eligible pairs on the phrasing's right task and on a wrong one, by the
  support rule that admitted them (search.learned.supported), and what the majority rule left
  out (pairs that would count with enough sessions, but hold no majority of their query's);
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

    from analytics.learning import counting_rule, load_learned
    from analytics.learning_models import LearnedEvidence
    from catalog import db
    from ops.simulate_traffic import clinc_setup
    from search.embeddings import CachedEmbedder, LocalE5Embedder
    from search.learned import CountingRule
    from search.learned import eligible as learned_eligible
    from search.learned import normalised_query, sketch_count, sketch_union
    from settings import Settings

    settings = Settings.from_env({"TASKFINDER_DATA_DIR": args.data_dir})
    engine = db.make_engine(settings.database)
    with engine.connect() as connection:
        rows = list(connection.execute(select(LearnedEvidence.__table__)))
    tasks, cases, pool, *_ = clinc_setup(Path(args.clinc150), args.max_per_intent, args.pool_per_intent, args.seed)
    rule = counting_rule(settings)
    need_s, need_n, need_r, need_m = (rule["min_sessions"], rule["min_networks"], rule["min_relevance"],
                                      rule["majority_sessions"])
    query_sessions = {p.query: p.query_sessions for p in load_learned(engine)}

    def eligible(row, sessions: int | None = None, networks: int | None = None, majority: bool = True) -> bool:
        """The product's own rule (search.learned.eligible) for `row`, or for it with these
        counts; without `majority`, the plain LEARNING_MIN_SESSIONS rule only."""
        pair = SimpleNamespace(query=row.query, task_id=row.task_id, relevance=row.relevance, people=row.people,
                               sessions=row.sessions if sessions is None else sessions,
                               networks=row.networks if networks is None else networks,
                               query_sessions=query_sessions[row.query])
        return bool(learned_eligible([pair], CountingRule(**(rule if majority else
                                                             {**rule, "majority_sessions": None}))))

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
        elif eligible(row):
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
            if r.relevance < need_r or eligible(r):
                continue
            sessions, networks = r.session_sketch, r.network_sketch
            for other in by_task[r.task_id]:
                if other.query != r.query and float(vectors[at[r.query]] @ vectors[at[other.query]]) >= tau:
                    sessions = sketch_union(sessions, other.session_sketch)
                    networks = sketch_union(networks, other.network_sketch)
            if eligible(r, sketch_count(sessions), sketch_count(networks)):
                right += r.task_id in gold_of.get(r.query, ())
                wrong += r.task_id not in gold_of.get(r.query, ())
        pooling.append({"tau": tau, "right": right, "wrong": wrong})
    counted = [r for r in rows if eligible(r)]

    def right_wrong(pairs) -> dict:
        wrong = sum(r.task_id not in gold_of.get(r.query, ()) for r in pairs)
        return {"right": len(pairs) - wrong, "wrong": wrong}

    by_support = {
        f"{need_s}+ sessions": right_wrong([r for r in counted if eligible(r, majority=False)]),
        f"{need_m}..{need_s - 1} sessions, the query's majority": right_wrong(
            [r for r in counted if not eligible(r, majority=False)]),
        f"{need_m}..{need_s - 1} sessions, not the query's majority": right_wrong(
            [r for r in rows if not eligible(r) and eligible(r, sessions=need_s, majority=False)
             and need_m <= r.sessions < need_s]),
    } if need_m else {f"{need_s}+ sessions": right_wrong(counted)}
    print(json.dumps({
        "pool": len(pool), "phrasings": classes,
        "eligible_pairs": len(counted),
        "eligible_on_a_wrong_task": sum(r.task_id not in gold_of.get(r.query, ()) for r in counted),
        "by_support": by_support,
        "written_cross_task_cosine": {f"p{p}": round(float(np.percentile(cross, p)), 4) for p in (90, 99, 99.9)},
        "pooling": pooling}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
