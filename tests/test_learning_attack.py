"""Learning cannot be steered by cover traffic from a few networks (issue 33 item 1).

The audit's attack, through the real endpoints: from two /24 networks, a handful of sessions
search the demo's public test-case queries + " please" (k=1) and click the top result (cover
traffic that agrees with the ranking), and 2 sessions search the attack query and click a wrong
task at rank 10; then `app.py fit` with LEARNING_SETTLE_S=0. Before the fix the learned signal
was kept at weight 20.5 over 127 pairs and the wrong task rose from rank 10 to rank 2 for its
query and its paraphrases (from 2 networks and from 12).

What stops it (docs/learning-from-use.md, section 4):
* a network that holds more than LEARNING_MAX_NETWORK_SHARE of the learned pairs vouches for
  none of them (search.learned.heavy_networks): two networks make at most 2 pairs count;
* pairs that only agree with the ranking do not feed the `learned` signal in the CV that weighs
  it (search.fitting.informative_learned), which keeps it only with 3 more first hits than
  losses: the same cover from 12 networks, each under the share, buys the signal no weight;
* the as-cases test leaves near copies of each held-out case out of its fold
  (search.fitting.cv.near_copies): the same cover buys no exemplars either.
And a control: honest corrections from many networks still count beside the attack, earn the
signal its weight, and lift the right tasks.
"""
from __future__ import annotations

import pytest

from analytics.learning import load_learned
from tests.conftest import build_app, close_app, install_demo_fit, make_settings

ATTACK_QUERY = "driver background check for bus staff"
PARAPHRASES = ("background checks for bus drivers", "bus driver background check")
WRONG_TASK = "health.daily-health-check"     # at rank 10 for the attack query on the demo's fit
COVER_QUERIES = 126                          # ~252 cover votes, as in the audit
VOTES_PER_SESSION = 18                       # under LEARNING_MAX_VOTES_PER_SESSION (20): full weight
# The attack query's gold (Background Checks) is HR's. With the hidden-task rule (HIDDEN_SHADOW_RATIO,
# search.confidence.in_hidden_shadow) an anonymous caller typing it is told "not sure" and shown no
# task to click, which stops this attack before learning sees a vote. These scenarios test the
# learning's own defence, so the attacker is shown every answer the ranking has: the rule is off.
ATTACKER_SEES_ALL = {"HIDDEN_SHADOW_RATIO": 0}


def rank_of(service, query: str, task: str) -> int | None:
    """1-based rank of `task` among the first 10 results for `query` (None: not among them)."""
    ids = [r["id"] for r in service.search(query, k=10)["results"]]
    return ids.index(task) + 1 if task in ids else None


class Widget:
    """Searches and clicks as the widget sends them, from a given client address."""

    def __init__(self, app):
        self.client = app.test_client()

    def vote(self, query: str, session: str, address: str, k: int = 10, task: str | None = None) -> str:
        """Search `query` (k results) in `session` from `address`, send the impression, and click
        `task` (default: the first result) where it was shown; returns the clicked task."""
        env = {"REMOTE_ADDR": address}
        body = self.client.get("/api/search", query_string={"q": query, "k": k, "session": session},
                               environ_base=env).get_json()
        ids = [r["id"] for r in body["results"]]
        task = task or ids[0]
        events = [{"type": "impression", "search_id": body["search_id"], "query": query, "task_ids": ids},
                  {"type": "click", "search_id": body["search_id"], "task_id": task, "position": ids.index(task) + 1}]
        response = self.client.post("/api/events", json={"session_id": session, "events": events}, environ_base=env)
        assert response.status_code == 202
        return task


def networks(n: int) -> list[str]:
    """n distinct /24 networks (one address block each)."""
    return [f"198.51.{i}" for i in range(n)]


def attack(app, cases, blocks: list[str]) -> None:
    """The audit's traffic: each cover query ("<test-case query> please", k=1, its top result
    clicked) and the attack query (the wrong task clicked at rank 10) get 2 sessions, from two
    networks of `blocks` in turn; each session makes at most VOTES_PER_SESSION votes, each
    address at most a few sessions (under the per-address cap)."""
    widget = Widget(app)
    queries = sorted({c.query for c in cases if c.gold})[:COVER_QUERIES]
    plan = [(f"{q} please", 1, None) for q in queries] + [(ATTACK_QUERY, 10, WRONG_TASK)]
    for copy in range(2):
        for i, (query, k, task) in enumerate(plan):
            block = blocks[(2 * i + copy) % len(blocks)]
            session_no = (i // VOTES_PER_SESSION) * 2 + copy
            session = f"attacker-{block.replace('.', '-')}-{session_no:04d}-session"
            widget.vote(query, session, f"{block}.{1 + session_no % 200}", k, task)
    app.extensions["taskfinder_analytics"].flush()


@pytest.fixture
def demo(tmp_path, shared_cache_dir, demo_tasks, demo_cases):
    """The demo app with its shipped fit, aggregating every event at once (LEARNING_SETTLE_S=0),
    with the hidden-task rule off (ATTACKER_SEES_ALL)."""
    app = build_app(make_settings(tmp_path, shared_cache_dir, LEARNING_SETTLE_S=0, SECRET_KEY="s" * 40,
                                  **ATTACKER_SEES_ALL), demo_tasks, demo_cases)
    install_demo_fit(app)
    yield app
    close_app(app)


def fit(app) -> dict:
    """`app.py fit`: aggregate, refit, serve the new fit."""
    service = app.extensions["taskfinder"].search
    report = service.refit_now()
    service.live(wait=True)
    return report


@pytest.mark.xdist_group("demo-fit")   # tests/conftest.py: FIT_GROUPS
def test_cover_traffic_from_two_networks_cannot_steer_a_wrong_task_up(demo, demo_cases):
    """The audit's attack from 2 networks: they hold half the pairs each, over the share, and
    vouch for none (heavy_networks): no pair counts, and the wrong task stays where it was for
    its query and its paraphrases. Failed before (rank 10 -> 2, 7 -> 2, 7 -> 2; weight 20.5)."""
    service = demo.extensions["taskfinder"].search
    before = {q: rank_of(service, q, WRONG_TASK) for q in (ATTACK_QUERY, *PARAPHRASES)}
    assert before[ATTACK_QUERY] == 10
    attack(demo, demo_cases, networks(2))
    report = fit(demo)
    after = {q: rank_of(service, q, WRONG_TASK) for q in (ATTACK_QUERY, *PARAPHRASES)}
    print("attack 2 networks:", before, "->", after, report.get("learned"))
    for query, rank in after.items():
        assert rank is None or before[query] is None or rank >= before[query], (query, before[query], rank)
    assert "learned" not in report                    # no pair counts
    assert all("learned" not in r["contributions"] for r in service.search(ATTACK_QUERY, k=10)["results"])


@pytest.mark.xdist_group("demo-fit")   # tests/conftest.py: FIT_GROUPS
def test_cover_traffic_from_many_networks_buys_the_learned_signal_no_weight(demo, demo_cases):
    """The same traffic spread over 12 networks, each under the share: the pairs count, but the
    cover only agrees with the ranking, so the signal's CV holds the informative pairs alone
    (informative_learned) and gives the signal no weight. Failed before (weight 20.5, the wrong
    task 10 -> 2).

    Nor are the pairs taken as exemplars: the as-cases test leaves out of each fold the learned
    queries that are near copies of its held-out cases (search.fitting.cv.near_copies), so
    "<case> please" no longer carries each held-out case's answer into its own test. Failed
    before that (as-cases taken, the wrong pair among them, the wrong task 10 -> 2)."""
    service = demo.extensions["taskfinder"].search
    before = {q: rank_of(service, q, WRONG_TASK) for q in (ATTACK_QUERY, *PARAPHRASES)}
    attack(demo, demo_cases, networks(12))
    report = fit(demo)
    signal = report["cv"]["full"].get("learned_signal")
    print("attack 12 networks:", report.get("learned"), signal)
    assert report["learned"]["pairs"] > 120 and report["learned"]["informative"] < 40
    assert signal is None or not signal["kept"]
    assert demo.extensions["taskfinder"].search.live().params.weights.full.learned == 0.0
    assert not report["learned"]["as_cases"]
    after = {q: rank_of(service, q, WRONG_TASK) for q in (ATTACK_QUERY, *PARAPHRASES)}
    for query, rank in after.items():
        assert rank is None or before[query] is None or rank >= before[query], (query, before[query], rank)


# Queries near a written case that the written ranking answers wrongly, each with its right task
# and that task's rank on the demo's fit (found by ranking 1,308 variants of the demo's case
# queries: these 4 were the only ones whose right task was shown below rank 1). The tests read the
# ranks at run time (`ranks_before`): a query's vector differs a little from one CPU to another
# (tests/test_shipped_fit.py), enough to swap two tasks whose scores are 0.04 apart.
CORRECTIONS = (("teacher-child interaction", "education.class-observation", 2),
               ("where do I record a child's", "health.immunizations", 2),
               ("classes attendance", "family.parenting-curriculum", 4),
               ("a child", "ersea.withdrawal", 4))


def ranks_before(service) -> list[int]:
    """The right tasks' ranks before any correction: the premise, each shown but not first."""
    before = [rank_of(service, q, t) for q, t, _ in CORRECTIONS]
    assert all(rank is not None and 2 <= rank <= 4 for rank in before), (before, [r for *_, r in CORRECTIONS])
    return before


def honest(app, blocks: list[str], sessions_per_query: int = 3) -> None:
    """Honest corrections: per CORRECTIONS query, `sessions_per_query` people, each in a session
    of their own, search it and click its right task where it is shown; person i comes from
    network blocks[i % len(blocks)]."""
    widget = Widget(app)
    person = 0
    for query, task, _ in CORRECTIONS:
        for _ in range(sessions_per_query):
            block = blocks[person % len(blocks)]
            widget.vote(query, f"honest-{person:04d}-session", f"{block}.{1 + person % 200}", 10, task)
            person += 1
    app.extensions["taskfinder_analytics"].flush()


@pytest.mark.xdist_group("demo-fit")   # tests/conftest.py: FIT_GROUPS
def test_honest_corrections_from_many_networks_are_learned_beside_the_attackers_two(demo, demo_cases):
    """The control: people on 12 networks correct the ranking of 4 queries (the right task at
    rank 2-4) while the audit's two networks send their cover and attack traffic. The two
    attacking networks hold half the pairs each and vouch for none; the people's 4 pairs count,
    are informative, earn the `learned` signal its weight in the CV, and lift their right tasks;
    the wrong task stays where it was."""
    service = demo.extensions["taskfinder"].search
    before = ranks_before(service)
    attack(demo, demo_cases, networks(2))
    honest(demo, [f"203.0.{i}" for i in range(12)])
    report = fit(demo)
    assert len(load_learned(demo.extensions["taskfinder"].store.engine)) > 120
    print("control:", report.get("learned"), report.get("cv", {}).get("full", {}).get("learned_signal"))
    assert report["learned"]["pairs"] == report["learned"]["informative"] == len(CORRECTIONS)
    assert report["learned"]["used"] and report["learned"]["weight"] > 0
    lifted = [rank_of(service, q, t) for q, t, _ in CORRECTIONS]
    print("control ranks:", before, "->", lifted)
    assert all(after is not None and after <= rank for after, rank in zip(lifted, before))
    # anonymous networks only: their evidence counts inside the trusted top 3 alone (issue 42,
    # search.learned.anonymous_bounded), so the right task at rank 4 stays there (verified people
    # lift it: tests/test_learning_people.py::padded_cover_beside_a_verified_office)
    assert sum(after < rank for after, rank in zip(lifted, before) if rank <= 3) >= 2
    assert rank_of(service, ATTACK_QUERY, WRONG_TASK) == 10


@pytest.mark.xdist_group("demo-fit")   # tests/conftest.py: FIT_GROUPS
def test_two_networks_cannot_buy_the_signal_a_weight_with_right_corrections(demo):
    """Without cover: the two networks send the 4 right corrections themselves (what earned the
    signal its weight in the control) and then the wrong task at rank 10. Five pairs from two
    networks: each network holds half of them (over the share, counted of at least 5 pairs), so
    none counts. Failed before: the 5 pairs counted and bought the signal a weight of 33.4,
    the wrong pair included (its task then fell out of the top 10 rather than rising)."""
    service = demo.extensions["taskfinder"].search
    blocks = networks(2)
    honest(demo, blocks, sessions_per_query=2)
    widget = Widget(demo)
    for i, block in enumerate(blocks):
        widget.vote(ATTACK_QUERY, f"attacker-wrong-{i}-session", f"{block}.99", 10, WRONG_TASK)
    demo.extensions["taskfinder_analytics"].flush()
    report = fit(demo)
    print("two networks, right corrections:", report.get("learned"),
          report.get("cv", {}).get("full", {}).get("learned_signal"))
    rank = rank_of(service, ATTACK_QUERY, WRONG_TASK)
    assert rank is None or rank >= 10
    assert "learned" not in report                     # no pair counts (before: 5, weight 33.4)


# -- the absolute cap: honest volume does not dilute an attacker's networks ------------------------
class Pair:
    """A learned pair as search.learned reads one: who clicked it, as a network sketch."""

    def __init__(self, query: str, networks: list[str], task: str = "t", bits: int = 512):
        from search.learned import sketch_of

        self.query, self.task_id = query, task
        self.sessions, self.relevance, self.people = max(3, len(networks)), 0.9, 0
        self.networks, self.network_sketch = len(networks), sketch_of(networks, bits)


def test_two_networks_beside_many_honest_pairs_vouch_for_nothing_and_honest_volume_trips_no_network():
    """search.learned.heavy_networks with LEARNING_MAX_NETWORK_PAIRS (25): the simulator's case
    beside 2,000 honest CLINC150 searches, 477 honest pairs, each from 3 people's own networks,
    and 300 from the audit's two networks (2 per pair). Their share is 150 / 777 = 0.19, under
    0.2: by the share alone every pair counted (failed so before the cap). By credit each vouches
    for 150 pairs' worth, over 25: both are heavy, and their pairs, the attack among them, count
    no more. And 20,000 honest pairs over 30,000 networks, whose sketch bits collide (each bit
    carries ~59 networks), make no network heavy."""
    import random

    from search.learned import CountingRule, eligible, heavy_networks, network_bits, sketch_of

    rng = random.Random(33)
    honest = [Pair(f"honest {i}", [f"10.{i}.{j}" for j in range(3)]) for i in range(477)]
    attack = [Pair(f"cover {i}", ["203.0.113", "198.51.100"]) for i in range(299)]
    attack.append(Pair("driver background check for bus staff", ["203.0.113", "198.51.100"], "wrong"))
    attackers = network_bits(attack[0])
    assert not heavy_networks([*honest, *attack], 0.2) & attackers            # the share alone: diluted
    assert heavy_networks([*honest, *attack], 0.2, max_pairs=25) >= attackers
    rule = CountingRule(min_sessions=3, min_relevance=0.5, min_networks=2, max_network_share=0.2, max_network_pairs=25)
    counted = {(e.query, e.task_id) for e in eligible([*honest, *attack], rule)}
    assert counted == {(p.query, p.task_id) for p in honest}

    crowd = [Pair(f"q{i}", [f"n{rng.randrange(30_000)}" for _ in range(3)]) for i in range(20_000)]
    assert not heavy_networks(crowd, 0.2, max_pairs=25)
    assert len(network_bits(Pair("all", [f"n{i}" for i in range(30_000)]))) == 512   # every bit is shared
    assert sketch_of(["203.0.113"]) != sketch_of(["198.51.100"])


def test_an_honest_network_that_shares_a_heavy_networks_bit_keeps_its_voucher():
    """A heavy network was discounted by its sketch bit in every pair, so an honest network whose
    pseudonym hashes to the same bit lost its voucher: 478 honest pairs from 2 networks each (the
    minimum) beside 12 attacking networks' 360 pairs (30 pairs' worth each) lost 27 at 512 bits.
    With the 4096-bit network sketch the 512 bits are judged as before (the same heavy bits) and
    only the networks that made a bit heavy are left out (search.learned.heavy_within): 3 lost,
    those whose pseudonym shares an attacker's bit of the 4096 too (~956 x 12 / 4096 = 2.8, where
    512 bits gave ~22), and no attack pair counts. A row aggregated with 512 bits is judged as
    before."""
    from search.learned import NETWORK_SKETCH_BITS, CountingRule, eligible, fold_sketch, heavy_under, sketch_of

    rule = CountingRule(min_sessions=3, min_relevance=0.5, min_networks=2, max_network_share=0.2, max_network_pairs=25)
    attackers = [f"198.51.{i}" for i in range(12)]

    def judged(bits: int, narrow: int = 0) -> tuple[int, frozenset[int]]:
        honest = [Pair(f"honest {i}", [f"10.{i}.0", f"10.{i}.1"], bits=512 if i < narrow else bits) for i in range(478)]
        attack = [Pair(f"cover {i}", [attackers[i % 12], attackers[(i + 1) % 12]], bits=bits) for i in range(360)]
        found = {e.query for e in eligible([*honest, *attack], rule)}
        assert not found & {p.query for p in attack}
        return len(found), frozenset(heavy_under(rule, [*honest, *attack]))

    narrow_count, narrow_heavy = judged(512)
    wide_count, wide_heavy = judged(NETWORK_SKETCH_BITS)
    assert narrow_count == 451                      # 27 honest pairs share a bit with an attacker
    assert wide_count == 475 and wide_heavy == narrow_heavy     # the same bits judged heavy
    assert judged(NETWORK_SKETCH_BITS, narrow=40)[0] < 478      # old rows in a heavy bit: as before
    keys = [f"10.{i}.0" for i in range(50)]
    assert fold_sketch(sketch_of(keys, NETWORK_SKETCH_BITS), 512) == sketch_of(keys, 512)


def test_two_attackers_in_one_bit_are_both_left_out_and_the_honest_network_beside_them_is_not():
    """heavy_within takes a heavy bit's finer bits heaviest first until what is left is under the
    cap: two attacking networks whose pseudonyms share a 512-bit bucket, 30 pairs' worth each,
    are both over it; an honest network in the same bucket is not."""
    from search.learned import NETWORK_SKETCH_BITS, SKETCH_BITS, CountingRule, eligible, sketch_of

    def bucket(name: str) -> tuple[int, int]:
        fine = int.from_bytes(sketch_of([name], NETWORK_SKETCH_BITS), "big").bit_length() - 1
        return fine % SKETCH_BITS, fine

    by_bucket: dict[int, list[str]] = {}
    for i in range(20_000):
        name = f"203.{i // 256}.{i % 256}"
        by_bucket.setdefault(bucket(name)[0], []).append(name)
    a, b, honest = next(names[:3] for names in by_bucket.values() if len(names) >= 3)
    assert len({bucket(n)[1] for n in (a, b, honest)}) == 3       # one 512-bit bucket, three finer bits
    rule = CountingRule(min_sessions=3, min_relevance=0.5, min_networks=2, max_network_share=None, max_network_pairs=25)
    pairs = [Pair(f"cover {i}", [a, b], bits=NETWORK_SKETCH_BITS) for i in range(60)]
    pairs += [Pair("honest", [honest, "10.9.9"], bits=NETWORK_SKETCH_BITS)]
    assert {e.query for e in eligible(pairs, rule)} == {"honest"}
