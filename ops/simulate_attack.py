"""Adversarial simulator: can traffic steer learning from use? (issue 33 items 1 and 2;
docs/learning-from-use.md, section 4)

    python ops/simulate_attack.py --scenario all --clinc150 ../shared/data/clinc150 --json /tmp/attack.json
    python ops/simulate_attack.py --scenario cover                 # item 1 alone, on the demo catalog
    python ops/simulate_attack.py --scenario curve --clinc150 ../shared/data/clinc150 --curve-searches 1000

The machinery is ops/simulate_traffic.py's, imported: a real server (`python app.py serve`,
waitress; gunicorn for `workers`) over a fresh data directory, widget-shaped HTTP traffic
(`GET /api/search?q=..&k=..&rerank=1&session=..`, then `POST /api/events` with the impression
of the shown list and a click), each request's address sent as `X-Forwarded-For` through a
trusted proxy (127.0.0.1), `LEARNING_SETTLE_S=0`, and `python app.py fit` between phases (the
server stopped, so that its analytics writer has flushed). Nothing in the product is bypassed.

The attack runs on the demo catalog (`app.py load-demo`: 200 Head Start tasks, their public
test cases and the shipped fit), as the audit's did. Its target: the query "driver background
check for bus staff", whose results put the wrong task `health.daily-health-check` at rank 10,
and two paraphrases of it. Each scenario loads a fresh demo, ranks the target before, sends its
traffic, fits, ranks again, and reports the wrong task's rank for the three queries before and
after, `contributions.learned` of the wrong task, what the fit did with learned evidence (pairs
that count, informative ones, the `learned` signal's weight and CV verdict, whether the pairs
were taken as exemplars) and the attack pair's own counts (sessions, networks, and why it does
not count: search.learned.shortfall under the fit's settings).

Scenarios (`--scenario`, or `all`):

* `cover` (item 1 as the audit ran it): two /24 networks. Cover traffic: each of the demo's
  first `--cover-queries` (126) test-case queries + " please", searched with k=1 and its top
  result clicked, once from each network (~252 votes; sessions of at most 18 votes, each from an
  address of its own in its network). Attack: `--attack-clicks` (4) sessions, alternately from
  the two networks, search the target with k=10 and click the wrong task.
* `sybil`: the same traffic spread over `--sybil-networks` (12) /24s, each query's two votes
  from two of them in turn: every network holds under LEARNING_MAX_NETWORK_SHARE of the pairs.
* `flood`: one session from one address (192.0.2.66) searches the target and clicks the wrong
  task `--flood-clicks` (300) times; then `--flood-sessions` (60) fresh sessions from the same
  address click it once each. The event caps' refusals (HTTP 429) are counted.
* `slow-drip`: the cover attack spread over `--drip-rounds` (4) fits: each round a share of the
  cover queries and one attack click per network, from two /24s that are new each round, so
  that no round looks like more than two networks; the ranks after each round's fit.
* `workers` (item 2): gunicorn with two workers and no SECRET_KEY (the key file of the data
  directory, infra/secret_key.py). `--worker-sessions` (6) sessions from one address, each
  pinned to a worker in turn (a keep-alive connection whose `/healthz` named that worker's pid),
  search the target and click the wrong task. Reported: the worker pids that stored the clicks,
  the distinct network pseudonyms stored with them (search_events.network), and the pair's
  networks after the fit. Before infra/secret_key.py each worker keyed the pseudonym with its
  own random key: "networks 2, counts yes".
* `padded` (issue 42 item 1, the audit's third way through): each of the demo's first
  `--padded-queries` (40) test cases' queries padded with words of its gold task's name and help
  until its term overlap with the case is under 0.45 (so the near-copy rule, Jaccard 0.5, does
  not see it), searched with k=10 and the gold clicked, 2 sessions per query from 2 of the
  attacker's /24s in turn; then 4 sessions from 4 of them click the wrong task for the target.
  One run per `--padded-networks` (6, 20, 40). Before issue 42 the pairs counted, the as-cases
  test took them and the wrong task rose 10 -> 1 (6 networks, the audit) or 10 -> 2 (20).
* `ipv6-flood` (issue 42 item 4): `--ipv6-addresses` (40) addresses of one IPv6 /64 post
  events, a fresh session each, `--ipv6-rounds` (40) times, while a victim on another network
  posts one batch per round: the victim's refusals (HTTP 429) are the measure.
* `plant`, `probe` (issue 42 items 2 and 3; ops/attack_completions.py): completion planting (a
  giveaway query searched and clicked from 6, 20 and 40 networks) and private-query probing (a
  victim's search with a child's name, repeated by the attackers): is either offered as a
  completion to anonymous visitors?
* `curve` (`--clinc150` needed): ops/simulate_traffic.py's learning run on CLINC150
  (`--max-per-intent` (2) written cases per intent, checkpoints 0 and `--curve-searches`
  (1,000 and 2,000), val Hit@1 on `--val-limit` (500) seeded val queries). At each checkpoint,
  after the honest traffic and before its fit, the data directory (the log so far) is copied
  once per attack variant, and the attack traffic is sent into the copy before the same fit:
  `cover` (2 networks) and `sybil` (12 networks), with CLINC150's 300 written cases + " please"
  as the cover and, as the target, a val query the served ranking answers right with a wrong
  task at rank 10 (chosen once, on the no-traffic fit; two other val queries of its intent as
  paraphrases). The attack lands in the fit's one aggregation window with the honest searches
  since the last fit, where the order of votes does not matter. Reported per checkpoint: val
  Hit@1 of the honest and of each attacked fit, the gain over no traffic and the share of the
  honest gain each attacked run keeps (issue 33's Done-when asks for 80%), and the target's
  wrong-task rank.

`--json FILE` writes the whole result; a table is printed at the end.
"""
from __future__ import annotations

import argparse
import http.client
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ops.servers import ServerProcess, free_port, gunicorn_command  # noqa: E402
from ops.simulate_traffic import (ROLE_TOKEN_SECRET, Lab, build_parser, clinc_setup, measure, post_json,  # noqa: E402
                                  run as run_learning, search, session_id)

# The demo's target (tests/test_learning_attack.py attacks the same one in-process).
ATTACK_QUERY = "driver background check for bus staff"
PARAPHRASES = ("background checks for bus drivers", "bus driver background check")
WRONG_TASK = "health.daily-health-check"      # rank 10 for ATTACK_QUERY on the demo's shipped fit
VOTES_PER_SESSION = 18                        # under LEARNING_MAX_VOTES_PER_SESSION (20): full weight
FLOOD_ADDRESS = "192.0.2.66"
WORKERS_ADDRESS = "192.0.2.77"
DEMO_SCENARIOS = ("cover", "sybil", "flood", "slow-drip", "workers", "padded", "ipv6-flood", "plant", "probe")
SCENARIOS = (*DEMO_SCENARIOS, "curve")
PADDED_MAX_OVERLAP = 0.45   # the audit's padding: a cover query's term overlap with its case, under the near-copy rule's 0.5
IPV6_HOST = "2001:db8:6464:1"   # the /64 the ipv6-flood scenario's addresses share
DEFAULT_CACHE = Path(tempfile.gettempdir()) / "taskfinder-sim-cache"


def networks(n: int, first: int = 0) -> list[str]:
    """n distinct /24 networks (198.51.<i>.0/24)."""
    return [f"198.51.{i}" for i in range(first, first + n)]


class Traffic:
    """Widget-shaped votes against one server, counted: search `query` (k results) in a
    session, send the impression of the shown list and a click on `task` (default: the first
    result) where it was shown, from `address`."""

    def __init__(self, base: str, rng: random.Random):
        self.base, self.rng = base, rng
        self.searches = self.posts = self.clicks = self.refused = self.not_shown = 0

    def vote(self, query: str, session: str, address: str, k: int = 10, task: str | None = None,
             connection: "Pinned | None" = None) -> str | None:
        if connection is not None:
            body = connection.search(query, k, session, address)
        else:
            body = search(self.base, query, k, session)
        self.searches += 1
        shown = [row["id"] for row in body["results"]][:k]
        task = task or (shown[0] if shown else None)
        events = [{"type": "impression", "search_id": body["search_id"], "query": query, "task_ids": shown}]
        if task in shown:
            events.append({"type": "click", "search_id": body["search_id"], "task_id": task,
                           "position": shown.index(task) + 1})
        else:
            self.not_shown += 1
        payload = {"session_id": session, "events": events}
        status = (connection.post_events(payload, address) if connection is not None
                  else post_json(f"{self.base}/api/events", payload, address))
        self.posts += 1
        if status == 429:
            self.refused += 1
            return None
        if status != 202:
            raise RuntimeError(f"events: HTTP {status}")
        self.clicks += task in shown
        return task if task in shown else None

    def counts(self) -> dict:
        return {"searches": self.searches, "event_posts": self.posts, "clicks_stored": self.clicks,
                "refused_429": self.refused, "wrong_task_not_shown": self.not_shown}


class Sessions:
    """The attacker's sessions per network: each votes at most `per_session` times, each from an
    address of its own in its /24 (under the per-address session cap)."""

    def __init__(self, rng: random.Random, per_session: int = VOTES_PER_SESSION):
        self.rng, self.per_session = rng, per_session
        self.current: dict[str, tuple[str, str, int]] = {}
        self.made: dict[str, int] = {}

    def next(self, block: str) -> tuple[str, str]:
        session, address, used = self.current.get(block, (None, None, self.per_session))
        if used >= self.per_session:
            made = self.made.get(block, 0)
            session, address, used = session_id(self.rng), f"{block}.{1 + made % 200}", 0
            self.made[block] = made + 1
        self.current[block] = (session, address, used + 1)
        return session, address

    def fresh(self, block: str) -> tuple[str, str]:
        made = self.made.get(block, 0)
        self.made[block] = made + 1
        return session_id(self.rng), f"{block}.{1 + made % 200}"


def cover_attack(traffic: Traffic, cover: list[str], target: dict, blocks: list[str], attack_clicks: int,
                 rng: random.Random) -> None:
    """The audit's traffic (module docstring): each cover query + " please" (k=1, its top result
    clicked) from two of `blocks` in turn; then `attack_clicks` fresh sessions, from the blocks in
    turn, click the wrong task for the target query (k=10)."""
    sessions = Sessions(rng)
    for i, query in enumerate(cover):
        for copy in range(2):
            block = blocks[(2 * i + copy) % len(blocks)]
            traffic.vote(f"{query} please", *sessions.next(block), k=1)
    for j in range(attack_clicks):
        traffic.vote(target["query"], *sessions.fresh(blocks[j % len(blocks)]), k=10, task=target["wrong_task"])


def overlap(a: str, b: str) -> float:
    """Jaccard of the two texts' term sets (lexicon.text.terms, as search.fitting.cv.near_copies)."""
    from lexicon.text import terms

    x, y = set(terms(a)), set(terms(b))
    return len(x & y) / len(x | y) if x | y else 1.0


def padded(query: str, task) -> str:
    """`query` with words of `task`'s name and help appended, one at a time, until its term
    overlap with `query` is under PADDED_MAX_OVERLAP ("Lead Screening" -> "Lead Screening blood
    test type": the audit's padding, which the near-copy rule cannot see)."""
    text = query
    for word in f"{task.name} {task.help}".split():
        if overlap(text, query) < PADDED_MAX_OVERLAP:
            break
        if word.lower() not in text.lower():
            text = f"{text} {word}"
    return text


def padded_attack(traffic: Traffic, cover: list[tuple[str, object]], target: dict, blocks: list[str],
                  attack_clicks: int, rng: random.Random) -> None:
    """Issue 42 item 1: each (case query, gold task) of `cover` padded (`padded`), searched with
    k=10 and the gold clicked where shown, each in a fresh session, from two of `blocks` in turn
    (tests/test_learning_people.py sends the same); then `attack_clicks`
    fresh sessions, from the blocks in turn, click the wrong task for the target query."""
    sessions = Sessions(rng)
    for i, (query, task) in enumerate(cover):
        for copy in range(2):
            block = blocks[(2 * i + copy) % len(blocks)]
            traffic.vote(padded(query, task), *sessions.fresh(block), k=10, task=task.id)
    for j in range(attack_clicks):
        traffic.vote(target["query"], *sessions.fresh(blocks[j % len(blocks)]), k=10, task=target["wrong_task"])


def ranks(base: str, target: dict) -> dict:
    """The wrong task's 1-based rank among the first 10 results (None: not among them) and its
    `contributions.learned`, for the target query and its paraphrases (no session: not traffic)."""
    out = {}
    for query in (target["query"], *target["paraphrases"]):
        results = search(base, query, 10, rerank=False)["results"]
        ids = [row["id"] for row in results]
        row = results[ids.index(target["wrong_task"])] if target["wrong_task"] in ids else None
        out[query] = {"rank": ids.index(target["wrong_task"]) + 1 if row else None,
                      "learned_contribution": (row.get("contributions") or {}).get("learned") if row else None}
    return out


def learning_of(report: dict) -> dict:
    """What `app.py fit` did with learned evidence (its JSON report)."""
    learned = report.get("learned") or {}
    full = (report.get("cv") or {}).get("full") or {}
    signal = full.get("learned_signal") or {}
    return {"status": report.get("status"), "pairs_counted": learned.get("pairs", 0),
            "informative": learned.get("informative", 0), "weight": learned.get("weight") or 0.0,
            "signal_kept": signal.get("kept"), "first_hits": signal.get("first_hits"),
            "as_cases": bool(learned.get("as_cases")), "used": bool(learned.get("used")),
            "message": (report.get("learning") or {}).get("message")}


def pair_status(lab: Lab, query: str, task: str) -> dict:
    """The (query, task) pair's counts in learned_evidence and why it does not count (None: it
    counts), by the product's own rule under the lab's settings, heavy networks included."""
    from analytics.learning import counting_rule, load_learned
    from catalog import db
    from search import learned
    from search.learned import normalised_query

    settings = lab.settings()
    engine = db.make_engine(settings.database)
    try:
        pairs = load_learned(engine)
    finally:
        engine.dispose()
    counting = [p for p in pairs if why_not(p, settings) is None]
    if hasattr(learned, "heavy_under"):   # the product's own judgement (share and cap), where it has one
        heavy = learned.heavy_under(learned.CountingRule(**counting_rule(settings)), counting)
    else:
        heavy = learned.heavy_networks(counting, settings.learning_max_network_share)
    key = normalised_query(query)
    pair = next((p for p in pairs if p.query == key and p.task_id == task), None)
    if pair is None:
        return {"sessions": 0, "networks": 0, "counts": False, "why_not": "no click folded in",
                "heavy_networks": len(heavy)}
    why = why_not(pair, settings, heavy)
    return {"sessions": pair.sessions, "networks": pair.networks, "relevance": round(float(pair.relevance), 3),
            "counts": why is None, "why_not": why, "heavy_networks": len(heavy)}


def why_not(pair, settings, heavy: frozenset[int] = frozenset()) -> str | None:
    """search.learned.shortfall under the settings' counting rule (analytics.learning.counting_rule)."""
    from analytics.learning import counting_rule
    from search import learned

    rule = counting_rule(settings)
    if hasattr(learned, "CountingRule"):   # the rule as one object (issue 35.4)
        return learned.shortfall(pair, learned.CountingRule(**rule), heavy=heavy)
    return learned.shortfall(pair, **rule, heavy=heavy)


def rose(before: dict, after: dict) -> bool:
    """Whether the wrong task rose for any of the queries (entered the top 10, or moved up)."""
    for query, was in before.items():
        now = after[query]["rank"]
        if now is not None and (was["rank"] is None or now < was["rank"]):
            return True
    return False


# -- the demo's scenarios --------------------------------------------------------------------------

class DemoLab(Lab):
    """A Lab over the demo catalog as `app.py load-demo` installs it (tasks, test cases, the
    shipped fit). The attack query's gold is HR's: with the hidden-task rule an anonymous caller
    is told "not sure" and shown nothing to click, which stops the attack before learning sees a
    vote; the scenarios measure the learning's own defence, so the rule is off here
    (HIDDEN_SHADOW_RATIO=0: the attacker is shown every answer the ranking has)."""

    def __init__(self, data_dir: Path, cache_dir: Path, extra_env: dict[str, str] | None = None):
        data_dir.mkdir(parents=True, exist_ok=True)
        super().__init__(data_dir, cache_dir, {"HIDDEN_SHADOW_RATIO": "0", **(extra_env or {})})
        done = subprocess.run([sys.executable, "app.py", "load-demo"], cwd=ROOT, env=self.env,
                              capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            raise RuntimeError(f"app.py load-demo failed:\n{done.stderr[-3000:]}")
        self.loaded = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


def demo_target() -> dict:
    return {"query": ATTACK_QUERY, "paraphrases": list(PARAPHRASES), "wrong_task": WRONG_TASK}


def demo_cover(n: int) -> list[str]:
    """The first n (sorted) distinct queries of the demo's public test cases that have a gold."""
    from catalog.demo import DEMO_CASES, DEMO_CATALOG
    from catalog.formats import load_cases_file, load_tasks_file

    ids = {t.id for t in load_tasks_file(DEMO_CATALOG)}
    return sorted({c.query for c in load_cases_file(DEMO_CASES, ids) if c.gold})[:n]


def demo_gold_cover(n: int) -> list[tuple[str, object]]:
    """The first n (sorted) distinct (query, first gold task) of the demo's public test cases."""
    from catalog.demo import DEMO_CASES, DEMO_CATALOG
    from catalog.formats import load_cases_file, load_tasks_file

    tasks = {t.id: t for t in load_tasks_file(DEMO_CATALOG)}
    pairs = sorted({(c.query, c.gold[0]) for c in load_cases_file(DEMO_CASES, set(tasks)) if c.gold})
    return [(query, tasks[gold]) for query, gold in pairs[:n]]


def attack_once(args, work: Path, name: str, send) -> dict:
    """Load a fresh demo, rank the target, send(traffic, rng) through the server, fit, rank again."""
    started = time.perf_counter()
    lab = DemoLab(work / name, Path(args.cache_dir))
    target = demo_target()
    rng = random.Random(args.seed)
    try:
        base = lab.start()
        before = ranks(base, target)
        traffic = Traffic(base, rng)
        send(traffic, rng)
        lab.stop()
        report = lab.fit()
        base = lab.start()
        after = ranks(base, target)
        lab.stop()
    finally:
        lab.stop()
    return {"scenario": name, "target": target, "before": before, "after": after, "rose": rose(before, after),
            "traffic": traffic.counts(), "fit": learning_of(report),
            "attack_pair": pair_status(lab, target["query"], target["wrong_task"]),
            "seconds": round(time.perf_counter() - started, 1)}


def scenario_cover(args, work: Path, blocks: list[str], name: str) -> dict:
    cover = demo_cover(args.cover_queries)
    result = attack_once(args, work, name, lambda traffic, rng: cover_attack(
        traffic, cover, demo_target(), blocks, args.attack_clicks, rng))
    result.update(networks=len(blocks), cover_queries=len(cover), attack_clicks=args.attack_clicks)
    return result


def scenario_padded(args, work: Path, n_networks: int) -> dict:
    cover = demo_gold_cover(args.padded_queries)
    blocks = [f"198.{51 + i // 200}.{i % 200}" for i in range(n_networks)]
    result = attack_once(args, work, f"padded-{n_networks}", lambda traffic, rng: padded_attack(
        traffic, cover, demo_target(), blocks, args.attack_clicks, rng))
    result.update(networks=n_networks, cover_queries=len(cover), attack_clicks=args.attack_clicks)
    return result


def scenario_ipv6_flood(args, work: Path) -> dict:
    """Issue 42 item 4: `--ipv6-addresses` (40) addresses of one IPv6 /64 (one host) post events
    as fast as they can, each in sessions of its own, while a victim on another network posts a
    search's events now and then; reported: the victim's events refused (HTTP 429) of those sent,
    and the flood's. Before, each address counted alone: the flood filled the global event cap
    and the victim was refused 30 of 38 times."""
    started = time.perf_counter()
    lab = DemoLab(work / "ipv6-flood", Path(args.cache_dir))
    rng = random.Random(args.seed)
    victim = {"sent": 0, "refused": 0}
    flood = {"sent": 0, "refused": 0}
    try:
        base = lab.start()
        body = search(base, "lead screening", 5, session_id(rng))
        shown = [row["id"] for row in body["results"]]
        events = [{"type": "impression", "search_id": body["search_id"], "query": "lead screening", "task_ids": shown}]
        for round_ in range(args.ipv6_rounds):
            for n in range(args.ipv6_addresses):
                address = f"{IPV6_HOST}:{n:x}::{1 + round_ % 200:x}"
                status = post_json(f"{base}/api/events", {"session_id": session_id(rng), "events": events}, address)
                flood["sent"] += 1
                flood["refused"] += status == 429
            status = post_json(f"{base}/api/events", {"session_id": session_id(rng), "events": events}, "203.0.113.7")
            victim["sent"] += 1
            victim["refused"] += status == 429
    finally:
        lab.stop()
    return {"scenario": "ipv6-flood", "addresses": args.ipv6_addresses, "prefix": f"{IPV6_HOST}::/64",
            "flood": flood, "victim": victim, "seconds": round(time.perf_counter() - started, 1)}


def scenario_flood(args, work: Path) -> dict:
    def send(traffic: Traffic, rng: random.Random) -> None:
        session = session_id(rng)
        for _ in range(args.flood_clicks):
            traffic.vote(ATTACK_QUERY, session, FLOOD_ADDRESS, k=10, task=WRONG_TASK)
        for _ in range(args.flood_sessions):
            traffic.vote(ATTACK_QUERY, session_id(rng), FLOOD_ADDRESS, k=10, task=WRONG_TASK)

    result = attack_once(args, work, "flood", send)
    result.update(networks=1, flood_clicks=args.flood_clicks, flood_sessions=args.flood_sessions)
    return result


def scenario_slow_drip(args, work: Path) -> dict:
    """The cover attack over several fits, two new /24s each round (module docstring)."""
    started = time.perf_counter()
    lab = DemoLab(work / "slow-drip", Path(args.cache_dir))
    target, rng = demo_target(), random.Random(args.seed)
    cover = demo_cover(args.cover_queries)
    rounds, traffic = [], None
    try:
        base = lab.start()
        before = ranks(base, target)
        traffic = Traffic(base, rng)
        for r in range(args.drip_rounds):
            base = base if r == 0 else lab.start()
            traffic.base = base
            blocks = networks(2, first=2 * r)
            sessions = Sessions(rng)
            for query in cover[r::args.drip_rounds]:
                for copy in range(2):
                    traffic.vote(f"{query} please", *sessions.next(blocks[copy]), k=1)
            for block in blocks:
                traffic.vote(ATTACK_QUERY, *sessions.fresh(block), k=10, task=WRONG_TASK)
            lab.stop()
            report = lab.fit()
            base = lab.start()
            rounds.append({"round": r + 1, "networks_so_far": 2 * (r + 1), "after": ranks(base, target),
                           "fit": learning_of(report), "attack_pair": None})
            lab.stop()
            rounds[-1]["attack_pair"] = pair_status(lab, ATTACK_QUERY, WRONG_TASK)
            print(json.dumps(rounds[-1]), flush=True)
    finally:
        lab.stop()
    after = rounds[-1]["after"]
    return {"scenario": "slow-drip", "target": target, "before": before, "after": after,
            "rose": any(rose(before, r["after"]) for r in rounds), "traffic": traffic.counts(),
            "fit": rounds[-1]["fit"], "attack_pair": rounds[-1]["attack_pair"], "rounds": rounds,
            "networks": 2 * args.drip_rounds, "cover_queries": len(cover),
            "attack_clicks": 2 * args.drip_rounds, "seconds": round(time.perf_counter() - started, 1)}


class Pinned:
    """A keep-alive HTTP connection to one gunicorn worker: opened until `/healthz` on it names
    the wanted pid; the requests that follow on it reach that worker (gthread keeps a connection
    with the worker that accepted it for its keep-alive, 2 s; one it closed is not reopened:
    http.client's auto_open is off, so a request on it fails instead of reaching another worker)."""

    def __init__(self, port: int, pid: int | None, within_s: float = 30.0):
        deadline = time.monotonic() + within_s
        while True:
            self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            self.connection.request("GET", "/healthz")
            response = self.connection.getresponse()
            self.pid = json.loads(response.read())["pid"]
            if pid is None or self.pid == pid:
                self.connection.auto_open = 0   # a connection the worker closed raises, never reopens elsewhere
                return
            self.connection.close()
            if time.monotonic() > deadline:
                raise RuntimeError(f"worker {pid} accepted no connection within {within_s} s")
            time.sleep(0.02)

    def _request(self, method: str, path: str, body: bytes | None, headers: dict) -> tuple[int, bytes]:
        self.connection.request(method, path, body=body, headers=headers)
        response = self.connection.getresponse()
        return response.status, response.read()

    def search(self, query: str, k: int, session: str, address: str) -> dict:
        from urllib.parse import urlencode

        path = "/api/search?" + urlencode({"q": query, "k": str(k), "rerank": "1", "session": session})
        status, body = self._request("GET", path, None, {"X-Forwarded-For": address})
        if status != 200:
            raise RuntimeError(f"search {query!r}: HTTP {status}")
        return json.loads(body)

    def post_events(self, payload: dict, address: str) -> int:
        status, _ = self._request("POST", "/api/events", json.dumps(payload).encode("utf-8"),
                                  {"Content-Type": "application/json", "X-Forwarded-For": address})
        return status

    def close(self) -> None:
        self.connection.close()


def stored_networks(lab: Lab, sessions: list[str]) -> list[str]:
    """The distinct network pseudonyms stored with these sessions' events."""
    from sqlalchemy import text

    from catalog import db

    engine = db.make_engine(lab.settings().database)
    try:
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT DISTINCT network FROM search_events WHERE session_id IN ("
                                           + ",".join(f":s{i}" for i in range(len(sessions))) + ")"),
                                      {f"s{i}": s for i, s in enumerate(sessions)}).all()
    finally:
        engine.dispose()
    return sorted(str(r[0]) for r in rows)


def scenario_workers(args, work: Path) -> dict:
    """Item 2: one address through two gunicorn workers without SECRET_KEY (module docstring)."""
    started = time.perf_counter()
    lab = DemoLab(work / "workers", Path(args.cache_dir))
    target, rng = demo_target(), random.Random(args.seed)
    port = free_port()
    env = {**lab.env, "HOST": "127.0.0.1", "PORT": str(port), "WEB_CONCURRENCY": "2", "WEB_THREADS": "2"}
    env.pop("SECRET_KEY", None)

    def gunicorn() -> ServerProcess:
        server = ServerProcess(gunicorn_command(), env, lab.data_dir / "gunicorn.log", port, start_timeout_s=600)
        server.__enter__()
        return server

    server = gunicorn()
    try:
        before = ranks(server.url, target)
        first = Pinned(port, None)
        pids = [first.pid]
        first.close()
        while len(pids) < 2:   # the other worker: any connection that lands elsewhere
            other = Pinned(port, None)
            if other.pid not in pids:
                pids.append(other.pid)
            other.close()
        traffic, sessions, used = Traffic(server.url, rng), [], []
        for i in range(args.worker_sessions):
            connection = Pinned(port, pids[i % 2])
            session = session_id(rng)
            traffic.vote(ATTACK_QUERY, session, WORKERS_ADDRESS, k=10, task=WRONG_TASK, connection=connection)
            connection.close()
            sessions.append(session)
            used.append(connection.pid)
    finally:
        server.stop()
    networks_stored = stored_networks(lab, sessions)
    report = lab.fit()
    server = gunicorn()
    try:
        after = ranks(server.url, target)
    finally:
        server.stop()
    return {"scenario": "workers", "target": target, "before": before, "after": after, "rose": rose(before, after),
            "traffic": traffic.counts(), "fit": learning_of(report),
            "attack_pair": pair_status(lab, ATTACK_QUERY, WRONG_TASK), "networks": 1,
            "worker_pids": sorted(set(used)), "sessions_per_worker": {str(p): used.count(p) for p in sorted(set(used))},
            "network_pseudonyms_stored": networks_stored,
            "secret_key_file": (lab.data_dir / "secret_key").exists(),
            "seconds": round(time.perf_counter() - started, 1)}


# -- the learning curve, honest and attacked (CLINC150) --------------------------------------------

CURVE_VARIANTS = (("cover", 2), ("sybil", 12))


def clinc_target(base: str, val: list[tuple[str, str]], seed: int) -> dict:
    """A val query the served ranking answers right, with a wrong task at rank 10, and two other
    val queries of its intent (those that show that task in their top 10 first)."""
    order = list(val)
    random.Random(seed).shuffle(order)
    for query, gold in order:
        ids = [row["id"] for row in search(base, query, 10, rerank=False)["results"]]
        if len(ids) == 10 and ids[0] == gold and ids[9] != gold:
            siblings = [q for q, g in order if g == gold and q != query]
            shown = [q for q in siblings[:20]
                     if ids[9] in [r["id"] for r in search(base, q, 10, rerank=False)["results"]]]
            paraphrases = (shown + [q for q in siblings if q not in shown])[:2]
            return {"query": query, "paraphrases": paraphrases, "wrong_task": ids[9], "gold": gold}
    raise RuntimeError("no val query with a wrong task at rank 10")


def curve(args, work: Path) -> dict:
    """The honest run (simulate_traffic's, checkpoints 0 and each of --curve-searches) and, from a
    copy of its log before each checkpoint's fit, each attacked variant (module docstring)."""
    started = time.perf_counter()
    clinc = Path(args.clinc150)
    checkpoints = sorted({int(c) for c in args.curve_searches.split(",")})
    honest_dir = work / "curve-honest"
    honest_dir.mkdir(parents=True, exist_ok=True)
    learning_args = build_parser().parse_args([
        "--clinc150", str(clinc), "--max-per-intent", str(args.max_per_intent),
        "--checkpoints", ",".join(map(str, [0, *checkpoints])), "--val-limit", str(args.val_limit),
        "--seed", str(args.seed), "--cache-dir", args.cache_dir, "--data-dir", str(honest_dir)])

    def snapshot(lab: Lab, searches: int) -> None:
        for name, _ in CURVE_VARIANTS:
            shutil.copytree(lab.data_dir, work / f"curve-{searches}-{name}")

    honest = run_learning(learning_args, on_traffic_done=snapshot)
    _, cases, _, val, _, _ = clinc_setup(clinc, args.max_per_intent, learning_args.pool_per_intent, args.seed)
    sample = random.Random(args.seed + 1).sample(val, min(args.val_limit, len(val))) if args.val_limit else val
    cover = sorted({c.query for c in cases})
    extra = {"ROLE_TOKEN_SECRET": ROLE_TOKEN_SECRET}
    start = honest["curve"][0]
    target, points = None, []
    for searches in checkpoints:
        end = next(c for c in honest["curve"] if c["searches"] == searches)
        gain = end["hit@1"] - start["hit@1"]
        point = {"searches": searches,
                 "honest": {"hit@1": end["hit@1"], "hit@5": end["hit@5"], "mrr": end["mrr"], "refused": end["refused"],
                            "gain": round(gain, 4), "fit": end["fit"]}}
        for name, count in CURVE_VARIANTS:
            lab = Lab(work / f"curve-{searches}-{name}", Path(args.cache_dir), extra)
            rng = random.Random(args.seed + 100)
            try:
                base = lab.start()
                target = target or clinc_target(base, val, args.seed)
                before = ranks(base, target)
                traffic = Traffic(base, rng)
                cover_attack(traffic, cover, target, networks(count), args.attack_clicks, rng)
                lab.stop()
                report = lab.fit()
                base = lab.start()
                measured = measure(base, sample)
                after = ranks(base, target)
            finally:
                lab.stop()
            attacked_gain = measured["hit@1"] - start["hit@1"]
            point[name] = {"networks": count, "before": before, "after": after, "rose": rose(before, after),
                           "traffic": traffic.counts(), "fit": learning_of(report),
                           "attack_pair": pair_status(lab, target["query"], target["wrong_task"]), **measured,
                           "gain": round(attacked_gain, 4),
                           "kept_share_of_gain": round(attacked_gain / gain, 3) if gain > 0 else None}
            print(json.dumps({"searches": searches, name: point[name]}), flush=True)
        points.append(point)
    # the honest fit's ranking of the target at each checkpoint: what the next checkpoint's copies
    # served before their fit, and the honest run's own last fit
    for point, following in zip(points, points[1:]):
        point["honest"]["after"] = following[CURVE_VARIANTS[0][0]]["before"]
    lab = Lab(honest_dir, Path(args.cache_dir), extra)
    try:
        points[-1]["honest"]["after"] = ranks(lab.start(), target)
    finally:
        lab.stop()
    return {"setup": {**honest["setup"], "checkpoints": checkpoints, "cover_queries": len(cover),
                      "attack_clicks": args.attack_clicks},
            "target": target, "hit@1_no_traffic": start["hit@1"], "no_traffic": start, "points": points,
            "seconds": round(time.perf_counter() - started, 1)}


# -- the run and its table -------------------------------------------------------------------------

def run(args) -> dict:
    chosen = SCENARIOS if args.scenario == "all" else (args.scenario,)
    if "curve" in chosen and not args.clinc150:
        raise SystemExit("the curve needs --clinc150 DIR")
    work = Path(args.data_dir or tempfile.mkdtemp(prefix="taskfinder-attack-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    out = {"work_dir": str(work), "scenarios": {}}
    for name in chosen:
        print(f"-- {name}", flush=True)
        if name == "cover":
            result = scenario_cover(args, work, networks(2), "cover")
        elif name == "sybil":
            result = scenario_cover(args, work, networks(args.sybil_networks), "sybil")
        elif name == "flood":
            result = scenario_flood(args, work)
        elif name == "slow-drip":
            result = scenario_slow_drip(args, work)
        elif name == "workers":
            result = scenario_workers(args, work)
        elif name == "padded":
            for n in args.padded_networks:
                result = scenario_padded(args, work, n)
                out["scenarios"][f"padded-{n}"] = result
                print(json.dumps(result), flush=True)
            continue
        elif name == "ipv6-flood":
            out["ipv6-flood"] = scenario_ipv6_flood(args, work)
            print(json.dumps(out["ipv6-flood"]), flush=True)
            continue
        elif name in ("plant", "probe"):
            from ops import attack_completions

            out[name] = getattr(attack_completions, f"scenario_{name}")(args, work)
            print(json.dumps(out[name]), flush=True)
            continue
        else:
            out["curve"] = curve(args, work)
            print(json.dumps(out["curve"]), flush=True)
            continue
        out["scenarios"][name] = result
        print(json.dumps(result), flush=True)
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def _rank(value: dict) -> str:
    return "–" if value["rank"] is None else str(value["rank"])


def table(result: dict) -> str:
    """The printed summary (and the docs' table)."""
    lines = ["| scenario | networks | searches (429) | wrong task rank: query, paraphrases (before → after) | "
             "rose | pairs counted (informative) | learned weight | as cases | attack pair: sessions / networks, why not |",
             "|---|---:|---:|---|:--:|---:|---:|:--:|---|"]
    for name, r in result.get("scenarios", {}).items():
        moves = ", ".join(f"{_rank(r['before'][q])} → {_rank(r['after'][q])}" for q in r["before"])
        pair = r["attack_pair"]
        lines.append(f"| {name} | {r['networks']} | {r['traffic']['searches']} ({r['traffic']['refused_429']}) | {moves} | "
                     f"{'**yes**' if r['rose'] else 'no'} | {r['fit']['pairs_counted']} ({r['fit']['informative']}) | "
                     f"{r['fit']['weight']:g} | {'yes' if r['fit']['as_cases'] else 'no'} | "
                     f"{pair['sessions']} / {pair['networks']}, {pair['why_not'] or 'counts'} |")
    flood = result.get("ipv6-flood")
    if flood:
        lines += ["", f"ipv6-flood: {flood['addresses']} addresses of {flood['prefix']}: flood refused "
                      f"{flood['flood']['refused']} of {flood['flood']['sent']}, the victim (another network) refused "
                      f"{flood['victim']['refused']} of {flood['victim']['sent']}"]
    for name in ("plant", "probe"):
        if result.get(name):
            lines += ["", f"{name}: {json.dumps(result[name], default=str)[:2000]}"]
    c = result.get("curve")
    if c:
        lines += ["", "| CLINC150, searches | traffic | val Hit@1 (0 → N) | gain | share of the honest gain | "
                  "pairs counted (informative) | as cases | learned weight | target's wrong task: query, paraphrases |",
                  "|---:|---|---|---:|---:|---:|:--:|---:|---|"]
        for point in c["points"]:
            h = point["honest"]
            lines.append(f"| {point['searches']:,} | honest | {c['hit@1_no_traffic']:.3f} → {h['hit@1']:.3f} | "
                         f"{h['gain']:+.3f} | 1 | {h['fit']['learned_pairs']} | "
                         f"{'yes' if h['fit']['learned_as_cases'] else 'no'} | {h['fit']['learned_weight']:g} | "
                         f"{', '.join(_rank(v) for v in h['after'].values())} |")
            for name, _ in CURVE_VARIANTS:
                r = point[name]
                moves = ", ".join(f"{_rank(r['before'][q])} → {_rank(r['after'][q])}" for q in r["before"])
                lines.append(f"| {point['searches']:,} | + {name} attack ({r['networks']} networks) | "
                             f"{c['hit@1_no_traffic']:.3f} → {r['hit@1']:.3f} | {r['gain']:+.3f} | "
                             f"{r['kept_share_of_gain']} | {r['fit']['pairs_counted']} ({r['fit']['informative']}) | "
                             f"{'yes' if r['fit']['as_cases'] else 'no'} | {r['fit']['weight']:g} | {moves} |")
    return "\n".join(lines)


def build_attack_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python ops/simulate_attack.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=(*SCENARIOS, "all"), default="all")
    parser.add_argument("--clinc150", default=None, help="CLINC150 directory (the curve)")
    parser.add_argument("--cover-queries", type=int, default=126, help="demo test-case queries used as cover")
    parser.add_argument("--attack-clicks", type=int, default=4, help="sessions clicking the wrong task")
    parser.add_argument("--sybil-networks", type=int, default=12)
    parser.add_argument("--flood-clicks", type=int, default=300)
    parser.add_argument("--flood-sessions", type=int, default=60)
    parser.add_argument("--drip-rounds", type=int, default=4)
    parser.add_argument("--worker-sessions", type=int, default=6)
    parser.add_argument("--padded-queries", type=int, default=40, help="padded: test cases padded into cover")
    parser.add_argument("--padded-networks", type=lambda text: [int(n) for n in text.split(",")], default=[6, 20, 40],
                        help="padded: the attacker's /24 networks, one run each (comma-separated)")
    parser.add_argument("--ipv6-addresses", type=int, default=40, help="ipv6-flood: addresses of one /64")
    parser.add_argument("--ipv6-rounds", type=int, default=40, help="ipv6-flood: posts per address")
    parser.add_argument("--max-per-intent", type=int, default=2, help="curve: written cases per intent")
    parser.add_argument("--curve-searches", default="1000,2000",
                        help="curve: checkpoints (cumulative honest searches) after 0, comma-separated")
    parser.add_argument("--val-limit", type=int, default=500, help="curve: seeded val queries measured (0: all)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--cache-dir", default=str(DEFAULT_CACHE), help="embedding cache (CACHE_DIR)")
    parser.add_argument("--data-dir", default=None, help="work directory (default: a fresh temporary one)")
    parser.add_argument("--json", default=None, help="write the JSON result here")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_attack_parser().parse_args(argv)
    result = run(args)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(table(result))
    print(f"({result['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
