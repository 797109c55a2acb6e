"""Traffic simulator: does the product learn from use? (issue 16 item 5; docs/learning-from-use.md)

    python ops/simulate_traffic.py --clinc150 ../shared/data/clinc150 --max-per-intent 2 \\
        --checkpoints 0,500,1000,2000,4000
    python ops/simulate_traffic.py --clinc150 ../shared/data/clinc150 --flood 300

What it does, with real parts only:

1. A fresh database (SQLite in a temporary data directory) gets CLINC150's 150 intents as tasks
   and `--max-per-intent` written cases per intent (the first ones of train.jsonl; no written
   out-of-scope case). The other training requests are the traffic pool: `--pool-per-intent`
   of them per intent (seeded sample), each one a phrasing staff keep typing.
2. The real server (`python app.py serve`, waitress; ops/servers.py) is started, and staff are
   simulated exactly as the widget (widget/static/widget.js) talks to it: each search is one
   person (a fresh session id of the widget's shape), `GET /api/search?q=..&k=8&rerank=1&session=..`,
   then `POST /api/events` with `{"session_id", "events": [impression{search_id, query,
   task_ids}, click{search_id, task_id, position}]}` (the impression of the settled list, and
   the click when there is one).
3. The click model (documented, seeded):
     * with probability `--noise` (0.15) the person clicks a uniformly random shown result
       (a wrong click, most of the time);
     * otherwise they scan the list top-down: the result at position k is examined with
       probability EXAMINE[k] (position bias: 1.0, 0.85, 0.7, 0.55, 0.45, 0.35, 0.3, 0.25)
       and the right task is clicked when examined;
     * else nothing is clicked: the search is abandoned.
4. At each checkpoint (cumulative searches) the server is stopped (its analytics writer flushes),
   `python app.py fit` runs (the fit folds the log into learned_evidence and weighs it by CV),
   the server is started again, and every held-out query (CLINC150 val, in scope) is searched
   through the API: Hit@1, Hit@5 and MRR.

`--flood N`: after the learning run's first fit, one session searches one val query N times and
clicks the same wrong task (one shown at position 2..8) every time; then fit, restart, and the
ranking of that query is compared with the one before the flood (and the whole val Hit@1).

Each simulated person's events come from an address of their own (person_address, one /24
each, sent as X-Forwarded-For to a server that trusts 127.0.0.1 as its proxy), so that the
distinct-network requirement of learning (LEARNING_MIN_NETWORKS) sees people as distinct, as
staff on different networks would be; LEARNING_SETTLE_S=0 lets the fit count events that are
seconds old.

`--flood-address N`: after that, N sessions from one address each search one val query and
click the same wrong task: the per-address session cap lets LEARNING_SESSIONS_PER_ADDRESS of
them bind, and the distinct-network requirement keeps the pair from counting.

`--offtopic P`: a share P of all searches is off-topic (CLINC150's oos_train requests, drawn from
a random sequence of their own between the in-scope searches, which stay those of a run without
them): shown results, nobody clicks but by the noise. Each checkpoint also measures the share of
oos_val the product answers (`offtopic_answered`): queries nobody clicks become negatives of the
abstention (search.learned.unclicked_queries).

`--reformulate P`: a person whose search ends without a click (abandoned, refused, or no
examined result was right) rephrases it with probability P: in the same session, from the same
address and with the same token, they search another traffic phrasing of the same intent and
behave as above; an off-topic searcher likewise tries another off-topic request. Learning
reads such chains (analytics.learning.chain_votes); LEARNING_CHAINS=0 on the same traffic
measures what they add. Each checkpoint reports `rephrased` and `rephrased_clicked`.

`--pool-as-cases`: no traffic; every phrasing of the traffic pool is written as a case beside
the written ones, and the fit is measured: what perfect learning from this pool could reach.

`--flood-returning N`: after that, one session from one address comes back N times, each time
searching a third val query, clicking the same wrong task once and letting the product fit: N
aggregation windows, one session and one network in all, so the pair never counts.

`--office N`: (the event caps of one address and one network lifted: the run sends 4,000 searches
in about 40 s, some 100 times an office's real pace) the same traffic (the same phrasings, clicks and sessions, in the same order), but
every person is one of N staff behind one office address (OFFICE_ADDRESS, through the trusted
proxy): one network. With `--office-tokens` the host verifies them: each search carries a role
token naming its person (`sub`: staff-0 .. staff-N-1; a fresh token per search, as a host mints
one per page load), sent with the search and with its events as the widget sends it; the product
then counts distinct people (LEARNING_MIN_PEOPLE) where it cannot count networks. Who searches is
drawn from a random sequence of its own, so the traffic is the one of a run without --office.
With --offtopic the off-topic searches come from the office's staff too (another sequence).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import secrets
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ops.servers import ServerProcess, free_port, http_get, server_env, waitress_command  # noqa: E402
from search.learned import normalised_query  # noqa: E402

EXAMINE = (1.0, 0.85, 0.7, 0.55, 0.45, 0.35, 0.3, 0.25)
OFFICE_ADDRESS = "198.51.100.10"
ROLE_TOKEN_SECRET = "simulated-host-role-token-secret-" + "0" * 32   # the simulated host's; --office-tokens
WIDGET_K = 8


def session_id(rng: random.Random) -> str:
    """An id of the widget's shape (randomId(): 16+ URL-safe characters)."""
    return "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") for _ in range(22))


def person_address(session: str) -> str:
    """The address a simulated person's events come from (through the server's trusted proxy,
    X-Forwarded-For): one per person, in its own /24 of 10.0.0.0/8, derived from the session id
    (so the traffic's random sequence is the same as without it)."""
    digest = hashlib.sha256(session.encode("ascii")).digest()
    return f"10.{digest[0]}.{digest[1]}.{1 + digest[2] % 254}"


def bearer(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def post_json(url: str, payload: dict, address: str | None = None, token: str | None = None) -> int:
    data = json.dumps(payload).encode("utf-8")
    headers = {"Content-Type": "application/json", "Connection": "close", **bearer(token)}
    if address:
        headers["X-Forwarded-For"] = address
    request = urllib.request.Request(url, data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def search(base: str, query: str, k: int, session: str | None = None, rerank: bool = True,
           token: str | None = None) -> dict:
    params = {"q": query, "k": str(k), "rerank": "1" if rerank else "0"}
    if session:
        params["session"] = session
    status, body = http_get(f"{base}/api/search?{urllib.parse.urlencode(params)}", timeout_s=30,
                            headers=bearer(token))
    if status != 200:
        raise RuntimeError(f"search {query!r}: HTTP {status}: {body[:200]!r}")
    return json.loads(body)


def ranked_ids(base: str, query: str) -> list[str]:
    """The top 10 the API ranks for `query` (no session, no re-ranking: not traffic)."""
    return [row["id"] for row in search(base, query, 10, rerank=False)["results"]]


def choose_click(rng: random.Random, shown: list[str], gold: str, noise: float) -> int | None:
    """The 0-based index clicked, or None (abandoned): the click model of the module docstring."""
    if not shown:
        return None
    if rng.random() < noise:
        return rng.randrange(len(shown))
    for index, task in enumerate(shown):
        if rng.random() < EXAMINE[min(index, len(EXAMINE) - 1)] and task == gold:
            return index
    return None


def simulate_search(base: str, rng: random.Random, query: str, gold: str, noise: float,
                    session: str | None = None, click_task: str | None = None, address: str | None = None,
                    limited: list | None = None, token: str | None = None) -> bool:
    """One person's search as the widget sends it; True when something was clicked. The events
    come from `address` (default: the person's own, person_address); `token`: the host's role
    token, sent with the search and its events. `limited`: where the product's event flood caps
    answer 429 (a flood run), that is noted there instead of raised."""
    session = session or session_id(rng)
    body = search(base, query, WIDGET_K, session, token=token)
    shown = [row["id"] for row in body["results"]][:WIDGET_K]
    events = [{"type": "impression", "search_id": body["search_id"], "query": query, "task_ids": shown}]
    index = shown.index(click_task) if click_task in shown else (
        None if click_task else choose_click(rng, shown, gold, noise))
    if index is not None:
        events.append({"type": "click", "search_id": body["search_id"], "task_id": shown[index], "position": index + 1})
    status = post_json(f"{base}/api/events", {"session_id": session, "events": events},
                       address or person_address(session), token)
    if status == 429 and limited is not None:
        limited.append(session)
        return False
    if status != 202:
        raise RuntimeError(f"events: HTTP {status}")
    return index is not None


def measure(base: str, cases: list[tuple[str, str]]) -> dict:
    """Hit@1, Hit@5 and MRR over (query, gold) through the API (no session: these searches
    are not traffic and bind no event); a "no confident match" counts as a miss, and `refused`
    is the share of these in-scope queries that got one."""
    hit1 = hit5 = rr = refused = 0.0
    for query, gold in cases:
        body = search(base, query, 10, rerank=False)
        refused += bool(body.get("no_confident_match"))
        ids = [row["id"] for row in body["results"]]
        rank = ids.index(gold) + 1 if gold in ids else None
        hit1 += rank == 1
        hit5 += rank is not None and rank <= 5
        rr += 1.0 / rank if rank else 0.0
    n = len(cases)
    return {"n": n, "hit@1": round(hit1 / n, 4), "hit@5": round(hit5 / n, 4), "mrr": round(rr / n, 4),
            "refused": round(refused / n, 4)}


class Lab:
    """A data directory, its database and the server over it."""

    def __init__(self, data_dir: Path, cache_dir: Path, extra_env: dict[str, str]):
        self.data_dir, self.port = data_dir, free_port()
        self.env = server_env(TASKFINDER_DATA_DIR=data_dir, CACHE_DIR=cache_dir, AUTO_FIT="0",
                              LEARNING_SETTLE_S="0", TRUSTED_PROXIES="127.0.0.1",
                              ANALYTICS_FLUSH_INTERVAL_S="0.5", **extra_env)
        self.server: ServerProcess | None = None

    def settings(self):
        from settings import Settings

        return Settings.from_env({k: v for k, v in self.env.items() if k.isupper()})

    def load(self, tasks, cases) -> None:
        from catalog import db
        from catalog.store import CatalogStore

        engine = db.make_engine(self.settings().database)
        db.upgrade(engine)
        store = CatalogStore(engine)
        store.import_tasks(tasks, replace=True)
        store.import_cases(cases, replace=True)
        engine.dispose()

    def start(self) -> str:
        self.server = ServerProcess(waitress_command(self.port), self.env, self.data_dir / "server.log", self.port,
                                    start_timeout_s=600)
        self.server.__enter__()
        return self.server.url

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def unclicked(self) -> tuple[str, ...]:
        """The queries nobody clicks, by the product's rule under the lab's settings (what the
        fit just weighed, less any that equal a case's query: none in these runs)."""
        from analytics.learning import learned_and_unclicked, load_learned
        from catalog import db

        settings = self.settings()
        engine = db.make_engine(settings.database)
        try:
            return learned_and_unclicked(load_learned(engine), settings)[1]
        finally:
            engine.dispose()

    def fit(self) -> dict:
        done = subprocess.run([sys.executable, "app.py", "fit"], cwd=ROOT, env=self.env, capture_output=True,
                              text=True, timeout=3600)
        if done.returncode != 0:
            raise RuntimeError(f"app.py fit failed:\n{done.stderr[-3000:]}")
        text = done.stdout[done.stdout.index("{"):]
        return json.loads(text)


def clinc_setup(directory: Path, written: int, pool_per_intent: int, seed: int):
    """(tasks, written cases, traffic pool [(query, gold)], held-out val [(query, gold)],
    off-topic traffic [query] (oos_train), off-topic held out [query] (oos_val))."""
    from evaluation.clinc150 import load

    data = load(directory)
    per_intent: dict[str, list] = defaultdict(list)
    for case in data.train:
        if case.gold:
            per_intent[case.gold[0]].append(case)
    rng = random.Random(seed)
    cases, pool = [], []
    for intent in sorted(per_intent):
        cases += per_intent[intent][:written]
        rest = per_intent[intent][written:]
        pool += [(c.query, intent) for c in rng.sample(rest, min(pool_per_intent, len(rest)))]
    val = [(c.query, c.gold[0]) for c in data.test if c.gold]
    return (data.tasks, cases, pool, val, [c.query for c in data.train if not c.gold],
            [c.query for c in data.test if not c.gold])


def answered(base: str, queries: list[str]) -> float:
    """The share of `queries` (off-topic) the product answers (no "no confident match")."""
    return round(sum(not search(base, q, 10, rerank=False).get("no_confident_match") for q in queries)
                 / max(1, len(queries)), 4)


def fit_summary(report: dict) -> dict:
    learned = report.get("learned") or {}
    full = (report.get("cv") or {}).get("full") or {}
    return {"status": report.get("status"), "learned_pairs": learned.get("pairs", 0),
            "unclicked_queries": (report.get("unclicked") or {}).get("queries", 0),
            "learned_weight": learned.get("weight", 0.0), "learned_as_cases": learned.get("as_cases", False),
            "cv_hit@1": (full.get("fitted") or {}).get("hit@1"),
            "cv_hit@1_without_learned": (full.get("fitted_without_learned") or {}).get("hit@1")}


def run(args, on_traffic_done=None) -> dict:
    """The learning run of the module docstring (and its flood runs); the JSON result.
    `on_traffic_done(lab, searches)`: called after the traffic up to each checkpoint, with the
    server stopped and its events flushed, before that checkpoint's fit (ops/simulate_attack.py
    copies the data directory there to mix attack traffic into the same log)."""
    rng = random.Random(args.seed)
    tasks, cases, pool, val, offtopic, offtopic_val = clinc_setup(Path(args.clinc150), args.max_per_intent,
                                                                  args.pool_per_intent, args.seed)
    # --offtopic: off-topic searches come between the in-scope ones from a sequence of their own,
    # so that the in-scope traffic (phrasings, clicks, sessions) is the one of a run without them
    other = random.Random(args.seed + 3)
    extra = args.offtopic / (1.0 - args.offtopic) if args.offtopic else 0.0
    offtopic_queries = {normalised_query(q) for q in offtopic}
    if args.val_limit:
        val = random.Random(args.seed + 1).sample(val, min(args.val_limit, len(val)))
    checkpoints = sorted({int(c) for c in args.checkpoints.split(",")})
    data_dir = Path(args.data_dir or tempfile.mkdtemp(prefix="taskfinder-sim-"))
    env = {"ROLE_TOKEN_SECRET": ROLE_TOKEN_SECRET}
    if args.office:   # the whole run's events from one address, ~100 times an office's real pace
        env.update(ANALYTICS_ADDRESS_EVENTS_PER_MINUTE="1000000", ANALYTICS_NETWORK_EVENTS_PER_MINUTE="0")
    lab = Lab(data_dir, Path(args.cache_dir), env)
    staff = random.Random(args.seed + 2)   # who searches (--office): a sequence of its own
    off_staff = random.Random(args.seed + 3)   # ... and who of them searches off-topic (--office --offtopic)
    if args.pool_as_cases:   # the ceiling: every traffic phrasing written as a case, no traffic
        from catalog.records import CaseRecord

        cases = [*cases, *(CaseRecord(query, (gold,)) for query, gold in pool)]
        checkpoints = [0]
    lab.load(tasks, cases)
    out = {"setup": {"tasks": len(tasks), "written_cases": len(cases), "pool": len(pool), "val": len(val),
                     "noise": args.noise, "examine": EXAMINE, "seed": args.seed, "data_dir": str(data_dir),
                     "office": args.office, "office_tokens": bool(args.office and args.office_tokens),
                     "offtopic_share": args.offtopic, "offtopic_pool": len(offtopic) if args.offtopic else 0,
                     "offtopic_val": len(offtopic_val), "reformulate": args.reformulate},
           "curve": []}
    done = clicked = off_done = rephrased = clicked_again = 0
    # --reformulate: whether and how an unclicked search is rephrased comes from sequences of their
    # own, so that the first searches (phrasings, clicks, sessions) are those of a run without it
    again, again_off = random.Random(args.seed + 4), random.Random(args.seed + 5)
    phrasings: dict[str, list[str]] = defaultdict(list)
    for query, gold in pool:
        phrasings[gold].append(query)
    try:
        for checkpoint in checkpoints:
            if checkpoint > done:
                base = lab.start()
                started = time.perf_counter()
                while done < checkpoint:
                    query, gold = rng.choice(pool)
                    address, token = office_person(args, staff)
                    session = session_id(rng)
                    hit = simulate_search(base, rng, query, gold, args.noise, session, address=address, token=token)
                    clicked += hit
                    done += 1
                    if not hit and again.random() < args.reformulate:   # the same person tries another phrasing
                        other_phrasing = again.choice([p for p in phrasings[gold] if p != query] or phrasings[gold])
                        clicked_again += simulate_search(base, again, other_phrasing, gold, args.noise, session,
                                                         address=address, token=token)
                        rephrased += 1
                    while extra and other.random() < extra / (1.0 + extra):   # geometric: extra per search on average
                        off_address, off_token = office_person(args, off_staff)   # the office's staff too
                        off_session = session_id(other)
                        hit = simulate_search(base, other, other.choice(offtopic), None, args.noise, off_session,
                                              address=off_address, token=off_token)
                        off_done += 1
                        if not hit and again_off.random() < args.reformulate:
                            simulate_search(base, again_off, again_off.choice(offtopic), None, args.noise, off_session,
                                            address=off_address, token=off_token)
                            rephrased += 1
                print(f"{done} searches ({clicked} clicked, {rephrased} rephrased, {clicked_again} of them clicked, "
                      f"{off_done} off-topic) in "
                      f"{time.perf_counter() - started:.0f} s", flush=True)
                lab.stop()
                if on_traffic_done is not None:
                    on_traffic_done(lab, done)
            fitted = fit_summary(lab.fit())
            if args.offtopic:   # which of them were off-topic, and which in-scope queries nobody clicked
                fitted["unclicked_offtopic"] = len(set(lab.unclicked()) & offtopic_queries)
            base = lab.start()
            point = {"searches": done, "clicked": clicked, "offtopic_searches": off_done, "rephrased": rephrased,
                     "rephrased_clicked": clicked_again, **measure(base, val),
                     "offtopic_answered": answered(base, offtopic_val), "fit": fitted}
            lab.stop()
            out["curve"].append(point)
            print(json.dumps(point), flush=True)
        if args.flood:
            out["flood"] = flood(lab, val, args.flood, rng)
            print(json.dumps(out["flood"]), flush=True)
        if args.flood_address:
            out["flood_address"] = flood(lab, val, args.flood_address, rng, one_address=True)
            print(json.dumps(out["flood_address"]), flush=True)
        if args.flood_returning:
            out["flood_returning"] = returning_flood(lab, val, args.flood_returning, rng)
            print(json.dumps(out["flood_returning"]), flush=True)
    finally:
        lab.stop()
    return out


def office_person(args, staff: random.Random) -> tuple[str | None, str | None]:
    """(address, role token) of the next search: (None, None) without --office (each person their
    own address); else the office's address, and with --office-tokens a token naming one of the
    staff (module docstring)."""
    if not args.office:
        return None, None
    person = staff.randrange(args.office)
    if not args.office_tokens:
        return OFFICE_ADDRESS, None
    from api.roles import sign_role_token

    return OFFICE_ADDRESS, sign_role_token(ROLE_TOKEN_SECRET, [], 300, subject=f"staff-{person}")


def flood(lab: Lab, val: list[tuple[str, str]], clicks: int, rng: random.Random, one_address: bool = False) -> dict:
    """One session clicks one wrong task `clicks` times for one query; with `one_address`,
    `clicks` sessions from one address click it once each, on another query (module docstring)."""
    base = lab.start()
    query, gold = val[1] if one_address else val[0]
    before = ranked_ids(base, query)
    wrong = next(t for t in before[1:WIDGET_K] if t != gold)
    session = session_id(rng)
    limited: list = []   # event batches the product's flood caps refused (HTTP 429)
    for _ in range(clicks):
        if one_address:
            simulate_search(base, rng, query, gold, 0.0, click_task=wrong, address="192.0.2.66", limited=limited)
        else:
            simulate_search(base, rng, query, gold, 0.0, session=session, click_task=wrong, limited=limited)
    before_hit1 = measure(base, val)["hit@1"]
    lab.stop()
    fitted = fit_summary(lab.fit())
    base = lab.start()
    after = ranked_ids(base, query)
    after_hit1 = measure(base, val)["hit@1"]
    lab.stop()
    return {"query": query, "wrong_task": wrong, "clicks": clicks, "refused_by_flood_caps": len(limited),
            "rank_before": before.index(wrong) + 1,
            "rank_after": after.index(wrong) + 1 if wrong in after else None, "ranking_unchanged": before == after,
            "val_hit@1_before": before_hit1, "val_hit@1_after": after_hit1, "fit": fitted}


def returning_flood(lab: Lab, val: list[tuple[str, str]], rounds: int, rng: random.Random) -> dict:
    """One session from one address comes back `rounds` times: each time it searches one val
    query and clicks the same wrong task once, then the product fits (a new aggregation window).
    One person, however patient, must not make the pair count (module docstring)."""
    query, gold = val[2]
    base = lab.start()
    before = ranked_ids(base, query)
    lab.stop()
    wrong = next(t for t in before[1:WIDGET_K] if t != gold)
    session, fits = session_id(rng), []
    for _ in range(rounds):
        base = lab.start()
        simulate_search(base, rng, query, gold, 0.0, session=session, click_task=wrong, address="192.0.2.77")
        lab.stop()
        fits.append(fit_summary(lab.fit()))
    base = lab.start()
    after = ranked_ids(base, query)
    lab.stop()
    return {"query": query, "wrong_task": wrong, "rounds": rounds, "rank_before": before.index(wrong) + 1,
            "rank_after": after.index(wrong) + 1 if wrong in after else None, "ranking_unchanged": before == after,
            "learned_pairs_after_each_fit": [f["learned_pairs"] for f in fits], "fit": fits[-1] if fits else None}


def build_parser() -> argparse.ArgumentParser:
    """The command line (ops/simulate_attack.py builds its curve's arguments with it)."""
    parser = argparse.ArgumentParser(prog="python ops/simulate_traffic.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--clinc150", required=True, help="CLINC150 directory (train/val jsonl, domains.json)")
    parser.add_argument("--max-per-intent", type=int, default=2, help="written cases per intent")
    parser.add_argument("--pool-per-intent", type=int, default=5, help="traffic phrasings per intent")
    parser.add_argument("--checkpoints", default="0,500,1000,2000,4000", help="cumulative searches to measure at")
    parser.add_argument("--noise", type=float, default=0.15)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--val-limit", type=int, default=0, help="measure on a seeded sample of val (0: all)")
    parser.add_argument("--flood", type=int, default=0, help="after the curve, one session clicks a wrong task N times")
    parser.add_argument("--flood-address", type=int, default=0,
                        help="then N sessions from one address click a wrong task once each")
    parser.add_argument("--flood-returning", type=int, default=0,
                        help="then one session from one address clicks a wrong task once per fit, N fits")
    parser.add_argument("--office", type=int, default=0,
                        help="every person is one of N staff behind one office address (module docstring)")
    parser.add_argument("--office-tokens", action="store_true",
                        help="with --office: the host verifies the staff (a role token naming each, sub)")
    parser.add_argument("--offtopic", type=float, default=0.0,
                        help="share of all searches that are off-topic (CLINC150 oos_train; nobody clicks but by noise)")
    parser.add_argument("--reformulate", type=float, default=0.0,
                        help="share of unclicked searches the same person rephrases (module docstring)")
    parser.add_argument("--pool-as-cases", action="store_true",
                        help="no traffic: write every traffic phrasing as a case, fit, measure (the ceiling)")
    parser.add_argument("--cache-dir", default=str(ROOT / "cache"), help="embedding cache (CACHE_DIR)")
    parser.add_argument("--data-dir", default=None, help="data directory (default: a fresh temporary one)")
    parser.add_argument("--out", default=None, help="write the JSON result here")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    result = run(args)
    text = json.dumps(result, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
