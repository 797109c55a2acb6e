"""Adversarial simulator: can traffic plant a completion, or make one tell a private search?
(issue 42, "People, not addresses"; search/completions.py; docs/security.md)

    python ops/attack_completions.py                       # both scenarios, 6, 20 and 40 networks
    python ops/attack_completions.py --networks 6 --json /tmp/completions.json

The machinery is ops/simulate_traffic.py's and ops/simulate_attack.py's: a real server
(`python app.py serve`) over a fresh copy of the demo (`app.py load-demo`, loaded once per run),
widget-shaped HTTP traffic (`GET /api/search?q=..&session=..`, then `POST /api/events` with the
impression of the shown list and a click on result 1), each request's address sent as
`X-Forwarded-For` through the trusted proxy (127.0.0.1). COMPLETION_SETTLE_S=0, so the attack gets
every chance: nothing waits for an admin. After the traffic the server is stopped (its analytics
writer flushes) and started again (its first search reads the popular searches at once), and the
probe prefixes are asked as an anonymous visitor (no session, no token: not traffic).

Scenarios, each with `--networks` (6, 20 and 40) /24s, one fresh session per network:

* `plant`: each network searches "eligibility determination free crypto giveaway" and clicks
  result 1 (the audit's planting, from N networks instead of 1). Probes: `el`, `elig`, `cryp`.
* `probe`: a victim, whose request carries the host's role token naming them (`sub`), searches
  "dental exam for jayden smith" and clicks; then every network repeats it anonymously (the audit's
  "did someone search X?" and its publishing of a child's name). Probes: `jay`, `den`.

"offered" for a prefix: the target query is among the completions /api/search returns for it.
Each run ends with a control on the same server: COMPLETION_MIN_PEOPLE + 1 distinct verified
people (role tokens of distinct `sub`s) search and click the target too; after a restart it is
expected offered (`control_offered`), which shows the probe can see a completion when the rule
lets one through.

`scenario_plant(args, work)` and `scenario_probe(args, work)` return JSON-able dicts (ops/
simulate_attack.py registers them); `main()` runs both and prints a table.
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ops.simulate_traffic import ROLE_TOKEN_SECRET, Lab, post_json, search, session_id  # noqa: E402

PLANT_QUERY = "eligibility determination free crypto giveaway"
PLANT_PREFIXES = ("el", "elig", "cryp")
PRIVATE_QUERY = "dental exam for jayden smith"
PRIVATE_PREFIXES = ("jay", "den")
VICTIM_ADDRESS = "192.0.2.200"
NETWORKS = (6, 20, 40)
LAB_ENV = {"COMPLETION_SETTLE_S": "0", "ROLE_TOKEN_SECRET": ROLE_TOKEN_SECRET}
DEFAULT_CACHE = Path(tempfile.gettempdir()) / "taskfinder-sim-cache"


def blocks(n: int) -> list[str]:
    """n distinct /24 networks (198.51.<i>.0/24)."""
    return [f"198.51.{i}" for i in range(n)]


def vote(base: str, query: str, session: str, address: str, token: str | None = None) -> bool:
    """The widget's search, then the impression and a click on result 1, from `address`; True when
    the events were stored (202)."""
    body = search(base, query, 10, session, rerank=False, token=token)
    shown = [row["id"] for row in body["results"]]
    events = [{"type": "impression", "search_id": body["search_id"], "query": query, "task_ids": shown}]
    if shown:
        events.append({"type": "click", "search_id": body["search_id"], "task_id": shown[0], "position": 1})
    status = post_json(f"{base}/api/events", {"session_id": session, "events": events}, address, token)
    return status == 202 and bool(shown)


def probe(base: str, query: str, prefixes) -> dict:
    """For each prefix: whether `query` is among an anonymous visitor's completions, and what they are."""
    from lexicon.text import normalise_query

    out = {}
    for prefix in prefixes:
        found = [c["text"] for c in search(base, prefix, 10, rerank=False)["completions"]]
        out[prefix] = {"offered": any(normalise_query(text) == normalise_query(query) for text in found),
                       "completions": found}
    return out


def token_of(subject: str) -> str:
    from api.roles import sign_role_token

    return sign_role_token(ROLE_TOKEN_SECRET, [], 300, subject=subject)


class DemoCopies:
    """The demo loaded once (ops.simulate_attack.DemoLab), copied into a fresh lab per run."""

    def __init__(self, work: Path, cache_dir: Path):
        self.work, self.cache_dir, self.base = work, cache_dir, work / "completions-demo"

    def lab(self, name: str) -> Lab:
        if not (self.base / "taskfinder.db").exists():
            from ops.simulate_attack import DemoLab

            DemoLab(self.base, self.cache_dir, LAB_ENV)
        target = self.work / name
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(self.base, target, ignore=shutil.ignore_patterns("server.log"))
        return Lab(target, self.cache_dir, LAB_ENV)


def run_once(copies: DemoCopies, name: str, n: int, query: str, prefixes, rng: random.Random,
             victim: str | None = None) -> dict:
    """One attack over n networks on a fresh demo copy, probed after a restart, then the control."""
    started = time.perf_counter()
    lab = copies.lab(f"{name}-{n}")
    settings = lab.settings()
    stored = 0
    try:
        base = lab.start()
        if victim is not None:
            stored += vote(base, query, session_id(rng), VICTIM_ADDRESS, token_of(victim))
        for block in blocks(n):
            stored += vote(base, query, session_id(rng), f"{block}.{rng.randrange(1, 255)}")
        lab.stop()
        base = lab.start()
        probes = probe(base, query, prefixes)
        people = settings.completion_min_people + 1
        for i in range(people):   # the control: that many verified people, each their own network
            vote(base, query, session_id(rng), f"203.0.{i}.9", token_of(f"{name}-colleague-{i}"))
        lab.stop()
        base = lab.start()
        control = probe(base, query, prefixes)
    finally:
        lab.stop()
    return {"scenario": name, "networks": n, "sessions": n, "accounts": int(victim is not None),
            "clicks_stored": stored, "query": query,
            "offered": {prefix: p["offered"] for prefix, p in probes.items()},
            "completions": {prefix: p["completions"] for prefix, p in probes.items()},
            "moved": any(p["offered"] for p in probes.values()),
            "control_people": people, "control_offered": {prefix: p["offered"] for prefix, p in control.items()},
            "seconds": round(time.perf_counter() - started, 1)}


def _copies(args, work: Path) -> DemoCopies:
    copies = getattr(args, "_completion_demo", None)
    if copies is None or copies.work != work:
        copies = DemoCopies(work, Path(getattr(args, "cache_dir", None) or DEFAULT_CACHE))
        args._completion_demo = copies
    return copies


def _networks(args) -> tuple[int, ...]:
    return tuple(getattr(args, "completion_networks", None) or NETWORKS)


def scenario_plant(args, work: Path) -> dict:
    """The crypto-giveaway planting from 6, 20 and 40 networks (module docstring)."""
    rng = random.Random(getattr(args, "seed", 7))
    runs = [run_once(_copies(args, work), "plant", n, PLANT_QUERY, PLANT_PREFIXES, rng) for n in _networks(args)]
    return {"scenario": "plant", "query": PLANT_QUERY, "runs": runs, "moved": any(r["moved"] for r in runs)}


def scenario_probe(args, work: Path) -> dict:
    """A victim's private search repeated from 6, 20 and 40 networks (module docstring)."""
    rng = random.Random(getattr(args, "seed", 7) + 1)
    runs = [run_once(_copies(args, work), "probe", n, PRIVATE_QUERY, PRIVATE_PREFIXES, rng, victim="parent-0042")
            for n in _networks(args)]
    return {"scenario": "probe", "query": PRIVATE_QUERY, "runs": runs, "moved": any(r["moved"] for r in runs)}


def table(results: list[dict]) -> str:
    lines = ["| scenario | networks | sessions | accounts | clicks stored | offered (prefix: yes/no) | control: k+1 people |",
             "|---|---|---|---|---|---|---|"]
    for result in results:
        for run in result["runs"]:
            offered = ", ".join(f"`{p}` {'YES' if v else 'no'}" for p, v in run["offered"].items())
            control = ", ".join(f"`{p}` {'yes' if v else 'no'}" for p, v in run["control_offered"].items())
            lines.append(f"| {run['scenario']} | {run['networks']} | {run['sessions']} | {run['accounts']} | "
                         f"{run['clicks_stored']} | {offered} | {control} |")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python ops/attack_completions.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=("plant", "probe", "all"), default="all")
    parser.add_argument("--networks", default=",".join(map(str, NETWORKS)), help="comma-separated network counts")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--cache-dir", default=str(DEFAULT_CACHE), help="embedding cache (CACHE_DIR)")
    parser.add_argument("--data-dir", default=None, help="work directory (default: a fresh temporary one)")
    parser.add_argument("--json", default=None, help="write the whole result here")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.completion_networks = tuple(int(n) for n in args.networks.split(","))
    work = Path(args.data_dir or tempfile.mkdtemp(prefix="taskfinder-completions-attack-"))
    work.mkdir(parents=True, exist_ok=True)
    results = []
    if args.scenario in ("plant", "all"):
        results.append(scenario_plant(args, work))
    if args.scenario in ("probe", "all"):
        results.append(scenario_probe(args, work))
    if args.json:
        Path(args.json).write_text(json.dumps({"work_dir": str(work), "scenarios": results}, indent=2) + "\n",
                                   encoding="utf-8")
    print(table(results))
    moved = any(r["moved"] for r in results)
    print(f"\nplanted or private completion offered: {'YES' if moved else 'no'} (work directory: {work})")
    return 1 if moved else 0


if __name__ == "__main__":
    raise SystemExit(main())
