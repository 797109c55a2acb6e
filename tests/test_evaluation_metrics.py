"""Metric code vs ir_measures (pytrec_eval), CIs, the significance test and the TREC files."""
from __future__ import annotations

import random
from types import SimpleNamespace

import ir_measures
import pytest
from ir_measures import P, R, RR, Success, nDCG

from catalog.records import CaseRecord
from evaluation import metrics
from evaluation.report import qid, write_qrels, write_run


def _random_data(seed: int, n_queries: int = 60, n_docs: int = 30):
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(n_docs)]
    cases, rankings = [], {}
    for i in range(n_queries):
        gold = tuple(rng.sample(docs, rng.randint(1, 4)))
        cases.append(CaseRecord(query=f"query {i}", gold=gold))
        rankings[f"query {i}"] = rng.sample(docs, rng.randint(0, 20))
    return cases, rankings


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_metrics_match_ir_measures(seed, tmp_path):
    cases, rankings = _random_data(seed)
    rows = [SimpleNamespace(query=c.query, gold=c.gold, ranking=rankings[c.query]) for c in cases]
    write_qrels(tmp_path / "qrels.txt", cases)
    write_run(tmp_path / "run.txt", "test", rows, cases)
    qrels = list(ir_measures.read_trec_qrels(str(tmp_path / "qrels.txt")))
    run = list(ir_measures.read_trec_run(str(tmp_path / "run.txt")))
    mapping = {"hit@1": Success @ 1, "hit@3": Success @ 3, "hit@5": Success @ 5, "p@1": P @ 1, "p@3": P @ 3,
               "p@5": P @ 5, "r@1": R @ 1, "r@3": R @ 3, "r@5": R @ 5, "mrr": RR, "ndcg@10": nDCG @ 10}
    theirs = {(m.query_id, str(m.measure)): m.value for m in ir_measures.iter_calc(list(mapping.values()), qrels, run)}
    ours_all = []
    for i, case in enumerate(cases):
        ours = metrics.per_query(rankings[case.query], case.gold)
        ours_all.append(ours)
        for key, measure in mapping.items():
            # ir_measures omits queries with an empty run; they score 0 everywhere
            expected = theirs.get((qid(i), str(measure)), 0.0)
            assert ours[key] == pytest.approx(expected, abs=1e-9), (key, case.query)
    aggregate = ir_measures.calc_aggregate(list(mapping.values()), qrels, run)
    means = metrics.mean_metrics(ours_all)
    # calc_aggregate averages over every judged query (an empty run scores 0), as we do
    for key, measure in mapping.items():
        assert means[key] == pytest.approx(aggregate[measure], abs=1e-9), key


def test_hand_computed_values():
    ranking = ["a", "x", "b", "y", "z"]
    gold = {"a", "b", "c"}
    row = metrics.per_query(ranking, gold)
    assert row["hit@1"] == 1.0 and row["p@3"] == pytest.approx(2 / 3) and row["r@5"] == pytest.approx(2 / 3)
    assert row["mrr"] == 1.0
    assert metrics.per_query(["x", "y", "a"], {"a"})["mrr"] == pytest.approx(1 / 3)
    assert metrics.per_query([], {"a"})["ndcg@10"] == 0.0


def test_trec_run_format(tmp_path):
    cases = [CaseRecord(query="q one", gold=("a",)), CaseRecord(query="q two", gold=())]
    rows = [SimpleNamespace(query="q one", gold=("a",), ranking=["b", "a", "c"]),
            SimpleNamespace(query="q two", gold=(), ranking=["c"])]
    write_run(tmp_path / "run.txt", "prefilter", rows, cases)
    write_qrels(tmp_path / "qrels.txt", cases)
    lines = (tmp_path / "run.txt").read_text().splitlines()
    assert lines[0] == "q00000 Q0 b 1 3 taskfinder-prefilter"
    assert lines[1] == "q00000 Q0 a 2 2 taskfinder-prefilter"
    assert lines[3] == "q00001 Q0 c 1 1 taskfinder-prefilter"
    for line in lines:
        parts = line.split()
        assert len(parts) == 6 and parts[1] == "Q0" and int(parts[3]) >= 1 and float(parts[4]) > 0
    assert (tmp_path / "qrels.txt").read_text() == "q00000 0 a 1\n"   # out-of-scope: no qrels line


def test_bootstrap_and_randomisation_are_seeded():
    values = [1, 0, 1, 1, 0, 1, 0, 1, 1, 1]
    assert metrics.bootstrap_ci(values, 7) == metrics.bootstrap_ci(values, 7)
    lo, hi = metrics.bootstrap_ci(values, 7)
    assert lo <= 0.7 <= hi
    assert metrics.randomisation_test(values, values, 1) == 1.0
    better = [1.0] * 40
    worse = [0.0] * 30 + [1.0] * 10
    assert metrics.randomisation_test(better, worse, 1) < 0.001
    assert metrics.randomisation_test(better, worse, 1) == metrics.randomisation_test(better, worse, 1)
