"""Measure what a visitor is shown when the right task is hidden from them (issue 43 item 4).

The demo as `make run` serves it (`app.py load-demo`: its catalog, cases and shipped fit, on a
fresh SQLite store in a temporary directory), asked through the app's real /api/search (WSGI test
client, anonymous: no role token) with every test case's query whose gold tasks are ALL
restricted to roles (hidden from the public), typed one character at a time from the third:

    junk       share of keystrokes answered with tasks (confidently), none of which can be right
    noted      share of keystrokes that say some of the best tasks are hidden (`hidden_by_role`)

and, so that the rule costs nothing elsewhere, the cases whose gold tasks are all public, typed
the same way: the share of keystrokes that show a gold task (found) and that refuse (refused).

    python ops/measure_hidden.py [--every N]     # every Nth keystroke (1: all; the default 1)

It runs on any commit that has `load-demo` and /api/search, so that a change is measured
against its parent with the same script.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def keystrokes(query: str, every: int) -> list[str]:
    text = " ".join(query.split())
    ends = list(range(min(3, len(text)), len(text) + 1))
    return [text[:end] for end in ends[::every]] + ([text] if (len(ends) - 1) % every else [])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", type=int, default=1)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="taskfinder-hidden-") as tmp:
        os.environ.update(DATABASE_URL=f"sqlite:///{tmp}/demo.db", ANALYTICS_ENABLED="0",
                          RATE_LIMITS="0", AUTO_FIT="0")
        from app import create_app
        from settings import Settings

        app = create_app(Settings.from_env())
        result = app.test_cli_runner().invoke(args=["load-demo"])
        assert result.exit_code == 0, result.output
        tasks = {json.loads(line)["id"]: json.loads(line) for line in
                 (ROOT / "catalog/data/headstart_catalog.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()}
        cases = [json.loads(line) for line in
                 (ROOT / "catalog/data/headstart_cases.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
        client = app.test_client()
        out = {}
        for name, pick in (("hidden gold", lambda gold: all(tasks[g].get("roles") for g in gold)),
                           ("public gold", lambda gold: not any(tasks[g].get("roles") for g in gold))):
            picked = [c for c in cases if c["gold"] and pick(c["gold"])]
            typed = junk = noted = found = refused = 0
            for case in picked:
                for text in keystrokes(case["query"], args.every):
                    body = client.get("/api/search", query_string={"q": text, "k": 5, "rerank": 0}).get_json()
                    shown = [r["id"] for r in body["results"]]
                    typed += 1
                    junk += bool(shown)
                    noted += body.get("hidden_by_role", 0) > 0
                    found += bool(set(shown) & set(case["gold"]))
                    refused += body["no_confident_match"]
            out[name] = {"cases": len(picked), "keystrokes": typed, "answered (junk if hidden)": round(junk / typed, 3),
                         "hidden noted": round(noted / typed, 3), "gold shown": round(found / typed, 3),
                         "refused": round(refused / typed, 3)}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
