"""Exemplar memory, prototypes, the per-catalog fit, abstention and pins, on data small enough
that the right answer is known by construction."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from catalog.records import CaseRecord, TaskRecord
from catalog.splits import holdout_split
from lexicon.rationale import build_lexicon, pin_key
from infra.metrics import Metrics
from search import prototypes
from search.confidence import AbstentionModel, assess, skip_rerank
from search.exemplars import build_exemplars
from search.fitting import CVQuery, cases_digest, choose_learned_signal, fit_abstention, fit_ranker, fit_weights
from search.index import build_index
from search.prefilter import prefilter
from search.ranker import FusionWeights, RankerParams, default_params
from serving.service import SearchService
from settings import FieldWeights, Weights

TASKS = [TaskRecord(id="bal", name="Account Balance", aliases=("balance",)),
         TaskRecord(id="tr", name="Transfer Money"),
         TaskRecord(id="bus", name="Bus Routes", help="stops")]
CASES = [CaseRecord(query="how much money do i have", gold=("bal",)),
         CaseRecord(query="move cash to savings", gold=("tr",)),
         CaseRecord(query="money in and out", gold=("bal", "tr")),
         CaseRecord(query="tell me a joke", gold=())]


def zero(**weights) -> Weights:
    return Weights(**{name: weights.get(name, 0.0) for name in Weights.__dataclass_fields__})


def test_exemplar_memory_keeps_whole_case_queries_names_and_out_of_scope_cases_apart():
    index = build_index(TASKS, build_lexicon(CASES), FieldWeights(), cases=CASES)
    memory = index.exemplars
    by_task = {}
    for text, row in zip(memory.texts, memory.task_rows):
        by_task.setdefault(TASKS[row].id, []).append(text)
    assert by_task["bal"] == ["Account Balance", "balance", "how much money do i have", "money in and out"]
    assert by_task["tr"] == ["Transfer Money", "move cash to savings", "money in and out"]  # two gold: in both
    assert by_task["bus"] == ["Bus Routes"]                   # no case: its name is still an exemplar
    assert memory.oos_texts == ("tell me a joke",) and list(memory.case_counts) == [2, 2, 0]
    assert list(memory.task_rows) == sorted(memory.task_rows)  # grouped by task
    # exemplar BM25 links a case-query word to the case's tasks only
    result = prefilter(index, "cash", zero(exemplar=1.0), k=3)
    assert result.ranked[0].task.id == "tr" and result.ranked[0].signals["exemplar"] > 0
    assert result.ranked[1].signals["exemplar"] == 0


def test_nearest_neighbour_cascade_agrees_with_the_full_scan():
    rng = np.random.default_rng(1)
    tasks = [TaskRecord(id=f"t{i}", name=f"task {i}") for i in range(200)]
    cases = [CaseRecord(query=f"query {i} {j}", gold=(f"t{i % 200}",)) for i in range(400) for j in range(2)]
    memory = build_exemplars(tasks, cases, {})
    vectors = rng.normal(size=(len(memory.texts), 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    memory = memory.with_vectors(vectors, None)
    query = vectors[7]
    full = memory.neighbour(query)
    assert full[memory.task_rows[7]] == pytest.approx(1.0)
    rows = np.array([3, 9, 17])
    partial = memory.neighbour(query, rows)
    assert np.allclose(partial[rows], full[rows]) and np.all(np.delete(partial, rows) == -1.0)
    # the neighbour signal's cascade: exact for the tasks whose centroid is closest, a floor for the rest
    from search import exemplars as exemplars_module

    visible = np.arange(200)
    centroid = memory.centroids @ query
    original = exemplars_module.NEIGHBOUR_FULL_SCAN
    exemplars_module.NEIGHBOUR_FULL_SCAN = 10
    try:
        cascade = exemplars_module.neighbour_signal(memory, visible, centroid, query)
    finally:
        exemplars_module.NEIGHBOUR_FULL_SCAN = original
    top = np.argsort(-centroid)[:exemplars_module.neighbour_candidates(200)]
    assert 200 > len(top)   # the cascade really ran
    assert np.allclose(cascade[top], full[top])
    assert np.all(cascade >= full[top].min() - 1e-6) and cascade.argmax() == full.argmax()


def test_prototypes_separate_neighbouring_tasks_better_than_centroids():
    """Two tasks that differ along direction a, with much larger shared noise along a + n: the
    centroids point along a and confuse them; the softmax regression learns to subtract the
    noise (Fisher's direction) and separates them."""
    rng = np.random.default_rng(0)
    shared, a, n = np.eye(8)[0], np.eye(8)[1], np.eye(8)[2]

    def sample(sign, count):
        noise = rng.normal(scale=0.6, size=(count, 1)) * (a + n) / np.sqrt(2)
        x = 2 * shared + sign * 0.15 * a + noise + rng.normal(scale=0.03, size=(count, 8))
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)

    train = np.vstack([sample(1, 300), sample(-1, 300)])
    rows = np.array([0] * 300 + [1] * 300)
    centroids = np.vstack([train[:300].mean(0), train[300:].mean(0)])
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    fitted = prototypes.fit_prototypes(train, rows, 2, centroids)
    test = np.vstack([sample(1, 500), sample(-1, 500)])
    truth = np.array([0] * 500 + [1] * 500)
    accuracy = lambda W: float(np.mean(np.argmax(test @ W.T, axis=1) == truth))  # noqa: E731
    assert accuracy(fitted) > accuracy(centroids) + 0.1
    decoded = prototypes.decode(prototypes.encode(fitted), 2)
    assert np.allclose(decoded, fitted, atol=1e-2 * np.abs(fitted).max())


def _query(values: dict[str, list[float]], gold: tuple[str, ...], fold: int = 0) -> CVQuery:
    tasks = tuple(TaskRecord(id=f"t{i}", name=f"t{i}") for i in range(len(next(iter(values.values())))))
    return CVQuery(CaseRecord(query=f"q{fold}-{gold}-{id(values)}", gold=gold), fold, tasks,
                   {k: np.asarray(v, dtype=np.float64) for k, v in values.items()}, None)


def test_the_fit_weights_the_signal_that_finds_the_gold_task():
    """Lexical points at the gold task, rationale at a random one: the conditional logit gives
    lexical the weight, whatever the prior said."""
    rng = np.random.default_rng(3)
    queries = []
    for i in range(120):
        gold = int(rng.integers(5))
        lexical = rng.uniform(0, 0.3, 5)
        lexical[gold] += 0.6
        rationale = rng.uniform(0, 1, 5)
        queries.append(_query({"lexical": lexical, "rationale": rationale, "typo": np.zeros(5),
                               "exemplar": np.zeros(5)}, (f"t{gold}",), i % 5))
    weights = fit_weights(queries, "sparse", zero(lexical=1.0, rationale=1.0))
    assert weights.lexical > 5 * abs(weights.rationale) and weights.lexical > 1.0
    only_rationale = fit_weights(queries, "sparse", zero(lexical=1.0, rationale=1.0), signals=("rationale",))
    assert only_rationale.lexical == 0.0


def test_the_learned_signal_is_kept_only_when_cross_fitted_cv_says_it_helps():
    """A `learned` signal that points at the gold task barely more often than at random (20% of
    queries, chance is 1/6) gets a weight from the in-sample fit, and lowers the MRR of queries
    ranked by weights fitted without them: dropped. One that is right half the time is kept,
    with its fitted weight."""
    prior = FusionWeights(zero(lexical=1.0, learned=1.0), zero(lexical=1.0))

    def queries(right: float, seed: int) -> list[CVQuery]:
        rng = np.random.default_rng(seed)
        out = []
        for i in range(150):
            gold = int(rng.integers(6))
            lexical = rng.uniform(0, 0.5, 6)
            if i % 3:                                  # the lexical signal finds two in three
                lexical[gold] += 0.7
            learned = rng.uniform(0, 0.3, 6)
            learned[gold if rng.random() < right else (gold + 1 + int(rng.integers(5))) % 6] += 1.0
            out.append(_query({"lexical": lexical, "learned": learned}, (f"t{gold}",), i % 5))
        return out

    for seed in (0, 1, 2):
        weak = queries(0.2, seed)
        fitted = fit_weights(weak, "full", prior.full)
        assert fitted.learned > 0                      # what the in-sample fit did
        kept, report = choose_learned_signal(weak, prior, fitted)
        assert not report["kept"] and kept.learned == 0.0 and kept.lexical > 0
        assert report["with"]["mrr"] < report["without"]["mrr"]
        useful = queries(0.5, seed)
        fitted = fit_weights(useful, "full", prior.full)
        kept, report = choose_learned_signal(useful, prior, fitted)
        assert report["kept"] and kept == fitted and kept.learned > 0


def test_abstention_is_fitted_on_out_of_scope_cases_and_pins_always_answer():
    rng = np.random.default_rng(5)
    queries = []
    for i in range(200):
        in_scope = i % 4 != 0
        strength = rng.uniform(0.5, 1.0) if in_scope else rng.uniform(0.0, 0.45)
        lexical = rng.uniform(0, 0.1, 4)
        lexical[0] = strength
        queries.append(_query({"lexical": lexical, "rationale": np.zeros(4), "typo": np.zeros(4),
                               "exemplar": np.zeros(4)}, ("t0",) if in_scope else (), i % 5))
    weights = FusionWeights(zero(lexical=5.0), zero(lexical=5.0))
    model = fit_abstention(queries, weights, "sparse")
    assert model is not None and model.cv["oos_fpr"] < 0.2 and model.cv["in_scope_abstain"] <= 0.05
    assert model.cv["cross_fitted"]
    index = build_index(TASKS, build_lexicon(CASES), FieldWeights(), cases=CASES)
    strict = AbstentionModel(("lexical",), (1.0,), 0.0, 100.0, {})
    assert not assess(prefilter(index, "bus", zero(lexical=1.0), k=3), strict).answer
    assert assess(prefilter(index, "bus", zero(lexical=1.0), k=3), None).answer
    pinned = prefilter(index, "Move cash to savings!", zero(lexical=1.0), k=3)
    assert pinned.ranked[0].pinned and assess(pinned, strict).answer
    nothing = prefilter(index, "zzqx", zero(lexical=1.0), k=3)
    assert not assess(nothing, None).answer   # no word points at any task, no embedding: no answer
    assert skip_rerank(pinned, 0.0) and not skip_rerank(pinned, 1.01)


def test_too_few_negatives_fall_back_to_the_one_class_score_and_too_few_cases_fit_nothing():
    queries = [_query({"lexical": [1.0, 0.0], "rationale": [0, 0], "typo": [0, 0], "exemplar": [0.2 + i / 100, 0]},
                      ("t0",) if i % 3 else (), i % 5) for i in range(45)]   # 15 out of scope: fewer than 20
    model = fit_abstention(queries, FusionWeights(zero(lexical=1.0), zero(lexical=1.0)), "sparse")
    assert model.cv["kind"] == "one-class" and model.coef[model.features.index("exemplar")] == 1.0
    assert model.cv["in_scope_abstain"] <= 0.05
    assert fit_abstention(queries[:20], FusionWeights(zero(lexical=1.0), zero(lexical=1.0)), "sparse") is None


def test_pins_match_the_whole_query_text_not_its_term_set():
    assert pin_key("What's my ASQ-3 score?") == "what s my asq 3 score"
    lexicon = build_lexicon([CaseRecord(query="transfer money to savings", gold=("tr",))])
    assert lexicon.pinned_for("Transfer money to savings.") == ("tr",)
    assert lexicon.pinned_for("transfer savings to money") == ()     # same terms, another request
    assert lexicon.pinned_for("transfer my money to savings") == ()  # one stopword more


# Local names people use for a task that no task text has: a word per written case below, and
# clicks that teach it in other words (no near copy of the case: search.fitting.cv.near_copies).
LOCAL_NAMES = ("marlquist", "tobrenza", "fenwickle", "gastrovane", "plimsore", "quoddle", "zantivar",
               "hexlomb", "brindlecap", "vorpmantle")


@pytest.fixture(scope="module")
def sparse_train_fit(tmp_path_factory, shared_cache_dir, demo_tasks, demo_cases):
    """(settings, training split, params, report) of the demo's training split (plus ten cases
    calling tasks by local names, LOCAL_NAMES) fitted without embeddings: made once for the two
    tests below that fit exactly this (same settings, cases and
    defaults; a fit is a pure function of them), which share a worker for it (xdist_group)."""
    from tests.conftest import make_settings

    from catalog.records import CaseRecord

    settings = make_settings(tmp_path_factory.mktemp("sparse-fit"), shared_cache_dir)
    train, _ = holdout_split(demo_cases, 0.2, 42)
    ids = sorted({t.id for t in demo_tasks if t.active})
    named = [ids[(17 * i) % len(ids)] for i in range(len(LOCAL_NAMES))]   # the as-cases test's local names
    train = [*train, *(CaseRecord(f"{name} please", (task,)) for name, task in zip(LOCAL_NAMES, named))]
    params, report = fit_ranker(settings, demo_tasks, train, None, default_params(settings))
    return settings, train, params, report


@pytest.mark.xdist_group("sparse-train-fit")
def test_fit_on_the_demo_without_embeddings_stores_and_round_trips(sparse_train_fit, demo_tasks):
    settings, train, params, report = sparse_train_fit
    assert report["status"] == "fitted" and report["n_cv_queries"] == len(train)
    cv = report["cv"]["sparse"]
    assert cv["fitted"]["mrr"] >= cv["defaults"]["mrr"] - 0.01
    assert params.abstention_for("full") is None   # no embedder: no full-mode model
    assert params.abstention_for("sparse") is not None   # in-scope cases alone calibrate one (test_abstention)
    again = RankerParams.from_dict(params.as_dict(), "fit", 7)
    assert again.weights == params.weights and again.shortlist_size == params.shortlist_size
    assert again.as_dict() == params.as_dict()
    few, report = fit_ranker(settings, demo_tasks, train[:5], None, default_params(settings))
    assert few.source == "default" and report["status"].startswith("defaults")


class ListSource:
    """A CatalogSource in memory with a fit table (CatalogStore's interface, no database)."""

    def __init__(self, tasks, cases):
        self._tasks, self._cases, self._revision, self.fits = list(tasks), list(cases), 1, []

    def revision(self):
        return self._revision

    def tasks(self):
        return list(self._tasks)

    def cases(self):
        return list(self._cases)

    def latest_fit(self):
        return self.fits[-1] if self.fits else None

    def fit_for_digest(self, digest):
        return next((f for f in reversed(self.fits) if f.cases_digest == digest), None)

    def save_fit(self, fitted_on_revision, digest, params, report):
        from types import SimpleNamespace

        self.fits.append(SimpleNamespace(id=len(self.fits) + 1, cases_digest=digest, params=params, report=report))
        self._revision += 1
        return len(self.fits)


# The mechanics of a fit (started in the background, stored, served; run by the CLI, listed) do not
# depend on how many cases it fits: these tests fit the demo's tasks with its first 100 cases
# (over FIT_MIN_CASES), ~2.5 s a fit instead of ~4.5 s with all 258.
MECHANICS_CASES = 100


def test_the_service_refits_in_the_background_when_cases_change_and_serves_the_fit(settings, demo_tasks,
                                                                                   demo_cases):
    demo_cases = demo_cases[:MECHANICS_CASES]
    source = ListSource(demo_tasks, demo_cases)
    service = SearchService(settings.with_overrides(embeddings_enabled=False, auto_fit=True), source, None, None,
                            Metrics())
    first = service.live(wait=True)
    assert first.params.source == "default" and first.fit_stale
    for thread in threading.enumerate():
        if thread.name == "taskfinder-fit":
            thread.join(600)   # a wait, not a speed target: the fit takes ~1-2 min on a busy 2-core machine
    assert len(source.fits) == 1 and source.fits[0].cases_digest == cases_digest(demo_tasks, demo_cases)
    fitted = service.live(wait=True)
    assert fitted.params.source == "fit" and fitted.params.fit_id == 1 and not fitted.fit_stale
    body = service.search("ASQ-3 Screening", k=3)
    assert body["ranker"]["fit_id"] == 1 and body["ranker"]["mode"] == "sparse"
    assert service.refit()["status"] == "up to date"    # same cases: nothing to do


def test_fit_command_fits_stores_and_lists(tmp_path, shared_cache_dir, demo_tasks, demo_cases):
    import json

    from tests.conftest import build_app, make_settings

    demo_cases = demo_cases[:MECHANICS_CASES]
    app = build_app(make_settings(tmp_path, shared_cache_dir, EMBEDDINGS_ENABLED=0), demo_tasks, demo_cases)
    runner = app.test_cli_runner()
    result = runner.invoke(args=["fit"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["status"] == "fitted" and report["fit_id"] == 1 and "sparse" in report["cv"]
    assert json.loads(runner.invoke(args=["fit"]).output)["status"] == "up to date"
    history = runner.invoke(args=["fit", "--history"]).output
    assert history.startswith("fit 1 ") and f"{len(demo_cases)} cases" in history


def test_pin_accuracy_counts_wrong_first_tasks_per_key():
    from evaluation.pins import pin_accuracy, term_set_key

    train = [CaseRecord(query="what is my balance", gold=("bal",)), CaseRecord(query="balance my budget", gold=("bud",))]
    test = [CaseRecord(query="my balance", gold=("bal",)), CaseRecord(query="budget balance", gold=("bal",)),
            CaseRecord(query="What is my balance?", gold=("bal",))]
    assert pin_accuracy(train, test, term_set_key) == {"fired_in_scope": 3, "wrong_first": 1, "wrong_share": 0.3333,
                                                      "fired_out_of_scope": 0}
    assert pin_accuracy(train, test, pin_key)["fired_in_scope"] == 1


@pytest.mark.xdist_group("sparse-train-fit")
def test_the_fit_takes_learned_exemplars_as_cases_only_when_cv_on_the_written_cases_improves(sparse_train_fit,
                                                                                               demo_tasks):
    """search.fitting.choose_learned_as_cases, in the degraded mode (fast): the training split
    plus ten written cases that each call a task by a local name no task text has ("marlquist
    please"), and what people typed, each local name in other words ("marlquist forms we use for the kids"),
    clicked on its task: the clicks join the cases (each held-out local-name case then finds its
    task through them). The same queries clicked on wrong tasks (a bot, or a feedback loop gone
    bad) do not, and the fit stays what it was without them. Nor does each written case's own
    query + " please" clicked on its own gold (the audit's cover traffic, issue 33 item 1): the
    CV leaves near copies of a held-out case out of its fold, so they are no evidence; before
    that rule they were taken, and a wrong pair sent with them rode along."""
    from search.learned import LearnedExemplar, LearnedInputs
    from lexicon.text import normalise_query

    settings, train, plain, plain_report = sparse_train_fit   # the training split + the local names, no use
    ids = sorted({t.id for t in demo_tasks if t.active})
    named = [ids[(17 * i) % len(ids)] for i in range(len(LOCAL_NAMES))]
    good = [LearnedExemplar(normalise_query(f"{name} forms we use for the kids"), task, 0.9, 5) for name, task in zip(LOCAL_NAMES, named)]
    copies = [LearnedExemplar(normalise_query(f"{c.query} please"), c.gold[0], 0.9, 5) for c in train if c.gold]

    def wrong(pairs):
        return [LearnedExemplar(e.query, ids[(ids.index(e.task_id) + 7) % len(ids)], 0.9, 5) for e in pairs]

    taken, report = fit_ranker(settings, demo_tasks, train, None, default_params(settings),
                               LearnedInputs(good, frozenset()))
    assert report["learned"]["as_cases"] and taken.learned_as_cases, report["cv"]["sparse"]["learned_as_cases_test"]
    cv = report["cv"]["sparse"]
    assert cv["fitted"]["hit@1"] > cv["fitted_without_learned"]["hit@1"]
    assert cv["fitted_without_learned"] == plain_report["cv"]["sparse"]["fitted"]
    for bad in (wrong(good), copies):
        refused, report = fit_ranker(settings, demo_tasks, train, None, default_params(settings),
                                     LearnedInputs(bad, frozenset()))
        assert not report["learned"]["as_cases"] and not refused.learned_as_cases and not refused.learned
        assert refused.weights == plain.weights
        assert not report["cv"]["sparse"]["learned_as_cases_test"]["better"]
