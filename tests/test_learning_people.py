"""A voice is a verified person (issue 42): what anonymous networks can and cannot teach.

Learned pairs that verified people stand behind (at least LEARNING_MIN_PEOPLE distinct people a
host vouched for, api.roles) are the product's full evidence: they feed the `learned` signal and
may become cases. Pairs that count on anonymous networks alone feed the `learned` signal only
inside the written evidence's top ANONYMOUS_WINDOW (search.learned.anonymous_bounded): however
many networks, they lift a task at most ANONYMOUS_WINDOW - 1 places, never into the top from
below it.

The audit's attack (issue 42 item 1), through the real endpoints: each public test case's query
padded with words of its gold task's name and help until its word overlap with the case is under
0.45 (so the near-copy rule, Jaccard 0.5, cannot see it), searched with k=10 and the gold
clicked, 2 sessions per query from 2 of the attacker's /24s in turn; then 4 sessions from 4 of
them search the attack query and click a wrong task at rank 10; `app.py fit`. Before: the pairs
counted, the as-cases test took them (10 wins, 3 losses) and the wrong task rose 10 -> 1.
"""
from __future__ import annotations

import numpy as np
import pytest

from api.roles import sign_role_token
from ops.simulate_attack import PADDED_MAX_OVERLAP, overlap, padded
from search.learned import (ANONYMOUS_WINDOW, CountingRule, LearnedExemplar, anonymous_bounded,
                            build_learned_memory, eligible, learned_cases, trusted_cases)
from search.ranker import RankerParams
from search.signal.learned import people_values
from tests.conftest import build_app, close_app, install_demo_fit, make_settings, postgres_schema
from tests.test_learning_attack import (ATTACK_QUERY, ATTACKER_SEES_ALL, CORRECTIONS, PARAPHRASES, WRONG_TASK, Widget, fit, rank_of,
                                        ranks_before)

ROLE_SECRET = "r" * 40
PADDED_COVER = 40            # 40 cover queries x 2 sessions + 4 attack sessions: the audit's 168 requests


def padded_cover_attack(app, cases, tasks, blocks: list[str], attack_sessions: int = 4) -> dict:
    """The audit's traffic (module docstring) from the networks `blocks`; returns its counts."""
    widget = Widget(app)
    by_id = {t.id: t for t in tasks}
    chosen = sorted({(c.query, c.gold[0]) for c in cases if c.gold and c.gold[0] in by_id})[:PADDED_COVER]
    sent = 0
    for i, (query, gold) in enumerate(chosen):
        cover = padded(query, by_id[gold])
        assert overlap(cover, query) < PADDED_MAX_OVERLAP
        for copy in range(2):
            block = blocks[(2 * i + copy) % len(blocks)]
            session = f"pad-{block.replace('.', '-')}-{i:03d}-{copy}-session"
            body = widget.client.get("/api/search", query_string={"q": cover, "k": 10, "session": session},
                                     environ_base={"REMOTE_ADDR": f"{block}.{1 + i % 200}"}).get_json()
            ids = [r["id"] for r in body["results"]]
            if gold in ids:
                widget.vote(cover, session, f"{block}.{1 + i % 200}", 10, gold)
                sent += 1
    for n in range(attack_sessions):
        block = blocks[n % len(blocks)]
        widget.vote(ATTACK_QUERY, f"pad-attack-{n:03d}-session", f"{block}.250", 10, WRONG_TASK)
    app.extensions["taskfinder_analytics"].flush()
    return {"cover_votes": sent, "networks": len(blocks)}


def demo_app_on(tmp_path, shared_cache_dir, demo_tasks, demo_cases, **env):
    app = build_app(make_settings(tmp_path, shared_cache_dir, LEARNING_SETTLE_S=0, SECRET_KEY="s" * 40,
                                  ROLE_TOKEN_SECRET=ROLE_SECRET, **{**ATTACKER_SEES_ALL, **env}), demo_tasks, demo_cases)
    install_demo_fit(app)
    return app


@pytest.fixture
def demo(tmp_path, shared_cache_dir, demo_tasks, demo_cases):
    app = demo_app_on(tmp_path, shared_cache_dir, demo_tasks, demo_cases)
    yield app
    close_app(app)


@pytest.fixture
def demo_postgresql(tmp_path, shared_cache_dir, demo_tasks, demo_cases):
    """The same on PostgreSQL (a fresh schema): the people and networks are counted there."""
    with postgres_schema() as (_schema, url):
        app = demo_app_on(tmp_path, shared_cache_dir, demo_tasks, demo_cases, DATABASE_URL=url)
        yield app
        close_app(app)


# Each test below is one scenario with one refit (a refit of the demo is 25-50 s, the most of this
# module's time): the padded cover and a verified office teach in the same traffic, on SQLite from
# 40 networks, on PostgreSQL from 20 (issue 44 item 9: the four scenarios apart cost the suite ~70 s
# more and asserted nothing these do not; the audit's attack alone, without honest traffic:
# tests/test_learning_attack.py).
@pytest.mark.xdist_group("demo-fit")   # tests/conftest.py: FIT_GROUPS
def test_padded_cover_from_40_networks_lifts_nothing_while_a_verified_office_teaches(demo, demo_cases, demo_tasks):
    padded_cover_beside_a_verified_office(demo, demo_cases, demo_tasks, 40)


@pytest.mark.xdist_group("demo-fit")   # tests/conftest.py: FIT_GROUPS
def test_padded_cover_from_20_networks_lifts_nothing_while_a_verified_office_teaches_on_postgresql(
        demo_postgresql, demo_cases, demo_tasks):
    padded_cover_beside_a_verified_office(demo_postgresql, demo_cases, demo_tasks, 20)


def padded_cover_beside_a_verified_office(demo, demo_cases, demo_tasks, n_networks):
    """Issue 42 item 1, the attack and its control in one traffic, one refit.

    The attack: the audit's padded cover from `n_networks` anonymous networks. Failed before
    (this traffic, 20 networks, alone): the pairs were taken as cases and the wrong task rose
    10 -> 2, its paraphrases 7 -> 2 (the audit saw 10 -> 1 from 6 networks). Now its pairs count
    on anonymous networks only: none is verified, and the wrong task rises for no query.

    The control: staff behind ONE office address (one network: anonymous, they would count for
    nothing), each search carrying a role token that names its person, correct the 4 queries whose
    right task the written evidence puts at rank 2-4 (tests/test_learning_attack.py's
    CORRECTIONS, 3 people each): exactly their pairs are verified, earn the `learned` signal its
    weight in the CV and lift the right tasks, the cover's anonymous pairs beside them."""
    service = demo.extensions["taskfinder"].search
    wrong_before = {q: rank_of(service, q, WRONG_TASK) for q in (ATTACK_QUERY, *PARAPHRASES)}
    assert wrong_before[ATTACK_QUERY] == 10
    right_before = ranks_before(service)
    sent = padded_cover_attack(demo, demo_cases, demo_tasks,
                               [f"198.{51 + i // 200}.{i % 200}" for i in range(n_networks)])
    assert sent["cover_votes"] >= 60
    office_corrects(demo)
    report = fit(demo)
    print(f"padded cover, {n_networks} networks, beside an office:", sent, report.get("learned"))
    wrong_after = {q: rank_of(service, q, WRONG_TASK) for q in (ATTACK_QUERY, *PARAPHRASES)}
    print("wrong task:", wrong_before, "->", wrong_after)
    for query, rank in wrong_after.items():
        before = wrong_before[query]
        assert rank is None or before is None or rank >= before, (query, before, rank)
    learned = report["learned"]
    assert learned["pairs"] > len(CORRECTIONS)            # the cover's pairs were learned, anonymous
    assert learned["verified"] == len(CORRECTIONS)        # the office's, and only those, verified
    assert learned["used"]
    right_after = [rank_of(service, q, t) for q, t, _ in CORRECTIONS]
    print("office ranks:", right_before, "->", right_after)
    assert all(after is not None and after <= rank for after, rank in zip(right_after, right_before))
    assert sum(after < rank for after, rank in zip(right_after, right_before)) >= 3


def office_corrects(demo) -> None:
    """The office's traffic (padded_cover_beside_a_verified_office): 3 verified people per
    CORRECTIONS query, all behind 203.0.113.10, each clicking the right task."""
    widget, person = Widget(demo), 0
    for query, task, _ in CORRECTIONS:
        for _ in range(3):
            token = sign_role_token(ROLE_SECRET, [], 300, subject=f"staff-{person}")
            env, headers = {"REMOTE_ADDR": "203.0.113.10"}, {"Authorization": f"Bearer {token}"}
            session = f"office-{person:03d}-session-abcdef"
            body = widget.client.get("/api/search", query_string={"q": query, "k": 10, "session": session},
                                     headers=headers, environ_base=env).get_json()
            ids = [r["id"] for r in body["results"]]
            events = [{"type": "impression", "search_id": body["search_id"], "query": query, "task_ids": ids},
                      {"type": "click", "search_id": body["search_id"], "task_id": task,
                       "position": ids.index(task) + 1}]
            assert widget.client.post("/api/events", json={"session_id": session, "events": events},
                                      headers=headers, environ_base=env).status_code == 202
            person += 1
    demo.extensions["taskfinder_analytics"].flush()


# -- the pure parts --------------------------------------------------------------------------------
class Pair:
    def __init__(self, query, task, people, networks):
        self.query, self.task_id, self.people, self.networks = query, task, people, networks
        self.sessions, self.relevance = max(3, people, networks), 0.9


def test_a_pair_is_verified_only_with_enough_distinct_people():
    rule = CountingRule(min_sessions=3, min_relevance=0.5, min_networks=2, min_people=2)
    found = {e.query: e.verified for e in eligible([Pair("people", "t", 2, 1), Pair("networks", "t", 0, 40),
                                                    Pair("one person", "t", 1, 5)], rule)}
    assert found == {"people": True, "networks": False, "one person": False}
    assert all(not e.verified for e in eligible([Pair("x", "t", 5, 5)], CountingRule(3, 0.5, 2)))   # no min_people


def test_the_trusted_cases_are_the_verified_ones_and_exist_only_beside_anonymous_ones():
    verified = LearnedExemplar("renew my card", "t1", 0.9, 3, verified=True)
    anonymous = LearnedExemplar("crypto giveaway", "t2", 0.9, 40, verified=False)
    assert [c.query for c in learned_cases([verified, anonymous])] == ["crypto giveaway", "renew my card"]
    assert [(c.query, c.gold) for c in trusted_cases([verified, anonymous])] == [("renew my card", ("t1",))]
    assert trusted_cases([anonymous]) == ()
    assert trusted_cases([verified]) is None                                   # nothing to bound
    assert trusted_cases([verified, anonymous], frozenset({"crypto giveaway"})) is None   # held out


def test_a_fit_keeps_who_stood_behind_each_pair_and_reads_an_old_row_as_anonymous():
    from search.ranker import FusionWeights
    from settings import Weights

    weights = FusionWeights(Weights(), Weights())
    params = RankerParams(weights, 15, learned=(LearnedExemplar("q", "t", 0.9, 3, True),
                                                 LearnedExemplar("r", "t", 0.8, 4, False)))
    again = RankerParams.from_dict(params.as_dict())
    assert [e.verified for e in again.learned] == [True, False]
    old = params.as_dict()
    old["learned"] = [row[:4] for row in old["learned"]]     # stored before issue 42
    assert [e.verified for e in RankerParams.from_dict(old).learned] == [False, False]


def test_anonymous_evidence_reorders_the_top_window_only():
    """x_L >= x_P; a task the written evidence puts at rank 10 stays at 10 whatever its anonymous
    evidence, while within the top ANONYMOUS_WINDOW it may rise to the first place."""
    people_scores = -np.arange(12, dtype=float)          # task i at written rank i + 1
    people = np.zeros(12)
    learned = np.zeros(12)
    learned[9] = 100.0                                   # rank 10: heavy anonymous evidence
    learned[ANONYMOUS_WINDOW - 1] = 100.0                # the window's last task too
    bounded = anonymous_bounded(learned, people, people_scores)
    assert bounded[9] == 0.0 and bounded[ANONYMOUS_WINDOW - 1] == 100.0
    final = people_scores + bounded
    order = list(np.argsort(-final, kind="stable"))
    assert order[0] == ANONYMOUS_WINDOW - 1 and order.index(9) == 9


def test_people_values_read_the_verified_exemplars_alone():
    exemplars = [LearnedExemplar("a", "t0", 0.9, 3, verified=True), LearnedExemplar("b", "t1", 0.9, 3, verified=False)]
    memory = build_learned_memory(["t0", "t1"], exemplars)
    assert memory.anonymous
    vectors = np.eye(2, dtype=np.float32)
    memory = memory.with_vectors(vectors, floor=0.1)
    rows = np.arange(2)
    assert people_values(memory, rows, vectors[1]).tolist() == pytest.approx([0.1, 0.1])   # b's own task: floor
    assert people_values(memory, rows, vectors[0]).tolist() == pytest.approx([1.0, 0.1])


# -- the bound through the real index and prefilter --------------------------------------------------
def served_with(service, live, exemplars):
    """The live demo indexed as serving builds it when the fit takes `exemplars` as cases
    (search.assembly.serving_index's recipe, search.index.with_use), with vectors."""
    from lexicon.rationale import build_lexicon
    from search.assembly import attach_vectors
    from search.index import build_index, with_use

    fields = service.settings.field_weights
    index = with_use(lambda cases: build_index(live.index.tasks, build_lexicon(cases), fields, cases=cases),
                     live.cases, exemplars)
    return attach_vectors(index, service.embedder)


def ranked(index, query, weights, embedder):
    from search.prefilter import prefilter
    from search.query import analyse_query

    analysed = analyse_query(index, query)
    return prefilter(index, analysed, weights, k=10, query_vector=embedder.embed([analysed.embedding_text], "query")[0])


def test_an_anonymous_case_cannot_lift_a_task_from_rank_8_and_a_verified_one_can(demo_app):
    """The same learned case, once with verified people behind it and once anonymous: verified,
    it lifts the task from rank 8 into the top 7 (as tests/test_learning.py's attribution test);
    anonymous, the task stays at 8 (outside the trusted top 3 it keeps its trusted values), and
    the scores shown still add up. The trusted pass reads the neighbour cosines from the served
    products (search.prefilter.written_neighbours): the same values a pass of its own gives."""
    from lexicon.text import normalise_query
    from search.prefilter import TRUSTED, signal_values
    from search.query import analyse_query

    service = demo_app.extensions["taskfinder"].search
    live = service.live(wait=True)
    weights = live.params.weights
    query = "where do i put the bus route changes"
    ids = [r.task.id for r in ranked(served_with(service, live, []), query, weights, service.embedder).ranked]
    target = ids[7]
    verified = served_with(service, live, [LearnedExemplar(normalise_query(query), target, 0.9, 5, verified=True)])
    assert verified.trusted is None
    lifted = [r.task.id for r in ranked(verified, query, weights, service.embedder).ranked]
    assert lifted.index(target) < 7
    anonymous = served_with(service, live, [LearnedExemplar(normalise_query(query), target, 0.9, 5, verified=False)])
    assert anonymous.trusted is not None
    result = ranked(anonymous, query, weights, service.embedder)
    assert [r.task.id for r in result.ranked].index(target) == 7
    for item in result.ranked:
        assert sum(item.contributions.values()) == pytest.approx(item.score, abs=1e-3)
    analysed = analyse_query(anonymous, query)
    vector = service.embedder.embed([analysed.embedding_text], "query")[0]
    rows, _ = anonymous.visible(None)
    fast = signal_values(anonymous, analysed, rows, vector)[TRUSTED + "neighbour"]
    own = signal_values(anonymous.trusted, analysed, rows, vector)["neighbour"]
    np.testing.assert_allclose(fast, own, atol=1e-6)
