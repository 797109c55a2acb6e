"""The ranking preview and its CV figures include learned evidence (issue 16 item 4), on the demo
catalog with the bundled embeddings; and the serving index drops a pair the admin blocked.

The learned exemplars are given to the ranker parameters directly (what a fit that weighed them
stores, search.ranker.RankerParams.learned); how they are learned is the learning work's."""
from __future__ import annotations

from dataclasses import replace

import pytest

from search.learned import LearnedExemplar, build_learned_memory, normalised_query, unrelated_cosine
from admin.preview import preview_change
from search.ranker import FusionWeights
from tests.test_preview import demo, service  # noqa: F401  (the demo service fixture and its data)

PARAPHRASE = "where does little timmy get picked up in the morning"
TARGET = "health.lead-screening"        # an absurd answer: only learned evidence can put it first
OTHER = ("bus route planning", "transport.bus-routes")
WEIGHT = 200.0   # the demo fit weighs dense cosines in the tens (embedding ~70): this makes use decide


class LearnedService:
    """The demo's SearchService as it would be after a fit that weighed `learned`: same settings,
    embedder and index, with the learned memory attached and the `learned` weight set."""

    def __init__(self, service, learned: tuple[LearnedExemplar, ...]):
        self.settings, self.embedder, self.enrichment = service.settings, service.embedder, service.enrichment
        live = service.live(wait=True)
        full = replace(live.params.weights.full, learned=WEIGHT if learned else 0.0)
        params = replace(live.params, learned=learned, weights=FusionWeights(full, live.params.weights.sparse))
        index = live.index
        if learned:
            memory = build_learned_memory([t.id for t in index.tasks], learned)
            floor = unrelated_cosine(index.exemplars.vectors, index.exemplars.task_rows)   # as attach_vectors does
            index = index.with_learned(memory.with_vectors(self.embedder.embed(list(memory.texts), "query"), floor))
        self._live = replace(live, params=params, index=index)

    def live(self, wait: bool = False):
        return self._live


def test_the_preview_ranks_with_learned_evidence(service):
    tasks, cases = demo(service)
    learned = (LearnedExemplar(PARAPHRASE, TARGET, 0.9, 5), LearnedExemplar(*OTHER, 0.9, 5))
    without = preview_change(LearnedService(service, ()), tasks, cases, tasks, cases, [PARAPHRASE])
    with_use = preview_change(LearnedService(service, learned), tasks, cases, tasks, cases, [PARAPHRASE])
    assert without.queries[0].after.tasks[0].id != TARGET
    assert with_use.queries[0].before.tasks[0].id == TARGET
    assert with_use.queries[0].after.tasks[0].id == TARGET


def test_the_cv_figures_include_learned_evidence_without_leaking_held_out_queries(service):
    tasks, cases = demo(service)
    in_scope = [c for c in cases if c.gold]
    # Use agrees with every test case: each query was clicked on its gold task.
    learned = tuple(LearnedExemplar(normalised_query(c.query), c.gold[0], 0.9, 5) for c in in_scope)
    plain = preview_change(LearnedService(service, ()), tasks, cases, tasks, cases, [])
    used = preview_change(LearnedService(service, learned), tasks, cases, tasks, cases, [])
    assert used.cv_before.n == plain.cv_before.n
    assert (used.cv_before.hit_at_5, used.cv_before.mrr) != (plain.cv_before.hit_at_5, plain.cv_before.mrr), \
        "the CV figures must rank with the learned evidence"
    # A held-out case's own learned exemplar is left out of its fold's index: with it, every case
    # would find its gold first through an exact match (MRR 1.0).
    assert used.cv_before.mrr < 0.99


@pytest.mark.xdist_group("demo-fit")   # tests/conftest.py: FIT_GROUPS
def test_the_evaluation_fits_with_learned_evidence_but_never_with_a_test_query(service):
    """The admin evaluation page's figures (evaluation.evaluate, which the page runs) weigh the
    catalog's learned evidence as the live fit does, minus any pair whose query is a held-out
    test query (use would otherwise answer the test itself)."""
    from catalog.splits import holdout_split
    from evaluation.evaluate import EvaluationOptions, Runtime, Split, evaluate
    from evaluation.runs import HOLDOUT, SEED

    tasks, cases = demo(service)
    # the demo's three largest categories (71 tasks, 103 of its cases): what this checks does not
    # depend on the catalog's size, and a fit on a third of it costs a sixth
    part = {t.id for t in tasks if t.category in ("health", "ersea", "education")}
    tasks, cases = [t for t in tasks if t.id in part], [c for c in cases if set(c.gold) <= part]
    train, test = holdout_split(cases, HOLDOUT, SEED)
    learned = tuple(LearnedExemplar(normalised_query(c.query), c.gold[0], 0.9, 5) for c in cases if c.gold)
    report, _ = evaluate(Runtime(service.settings, service.embedder), Split(tasks, train, test), ["prefilter"],
                         EvaluationOptions(seed=SEED, show=False, bootstrap_resamples=10, cv_max_queries=40), learned)
    from_train = sum(1 for c in train if c.gold)
    assert report["data"]["learned_pairs"] == from_train < len(learned)
    assert report["fit"]["learned"]["pairs"] == from_train


class LearnedCasesService(LearnedService):
    """... after a fit that put the learned exemplars among the cases (params.learned_as_cases):
    the live index is the union index, as SearchService._build makes it."""

    def __init__(self, service, learned: tuple[LearnedExemplar, ...]):
        from tests.test_learning import with_learned_cases

        super().__init__(service, ())
        live = self._live
        index = with_learned_cases(service, live, learned)
        self._live = replace(live, params=replace(live.params, learned=learned, learned_as_cases=True), index=index)


def test_the_preview_ranks_with_learned_exemplars_among_the_cases(service):
    """Failed before: the preview built its indexes from the written cases alone, so a fit that
    put use into the exemplar memory previewed rankings nobody would be served."""
    tasks, cases = demo(service)
    learned = (LearnedExemplar(PARAPHRASE, TARGET, 0.9, 5),)

    def rank_of_target(svc) -> int:
        shown = [t.id for t in preview_change(svc, tasks, cases, tasks, cases, [PARAPHRASE]).queries[0].after.tasks]
        return shown.index(TARGET) if TARGET in shown else len(shown)

    from tests.test_learning import ranked_ids

    served = LearnedCasesService(service, learned)
    live = served.live()
    live_ids = [r.task.id for r in ranked_ids(live.index, PARAPHRASE, live.params.weights, service.embedder).ranked]
    assert rank_of_target(LearnedCasesService(service, ())) > rank_of_target(served)
    assert rank_of_target(served) == live_ids.index(TARGET)   # what the preview shows is what is served
