"""Measure the completions under the search box (issue 43 item 5): how often, typing a held-out
query one character at a time, a completion offered leads to its gold task, and what the written
test cases' policy (search.completions.CASE_QUERIES) changes; `--spelling`: which test-case
queries the misspelling rule keeps out, per Zipf bar (lexicon.frequency).

    python ops/measure_completions.py                      # demo held-out (0.2, seed 42) and CLINC150 val
    python ops/measure_completions.py --spelling           # the demo's typo cases against the rest

The demo's held-out split is the evaluation's (catalog.splits.holdout_split); CLINC150's val
queries are a seeded sample of 600 in-scope ones (--clinc-sample), typed against completions built
from its training queries.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from catalog.formats import load_cases_file, load_tasks_file  # noqa: E402
from catalog.splits import holdout_split  # noqa: E402
from evaluation import clinc150  # noqa: E402
from evaluation.completions import completion_score  # noqa: E402
from lexicon import frequency  # noqa: E402
from search.completions import CASE_QUERIES, Vocabulary  # noqa: E402

DEMO_TASKS = ROOT / "catalog/data/headstart_catalog.jsonl"
DEMO_CASES = ROOT / "catalog/data/headstart_cases.jsonl"


def spelling(bars: list[float]) -> dict:
    """Per Zipf bar: the typo cases with a word judged misspelt, and the other cases with one."""
    tasks = load_tasks_file(DEMO_TASKS)
    rows = [json.loads(line) for line in DEMO_CASES.read_text(encoding="utf-8").splitlines() if line.strip()]
    vocabulary = Vocabulary(tasks)
    out = {}
    for bar in bars:
        frequency.COMMON_ZIPF = bar
        frequency.common.cache_clear()
        typos = [r["query"] for r in rows if r.get("category") == "typo"]
        others = [r["query"] for r in rows if r.get("category") != "typo"]
        out[str(bar)] = {"typo_cases_caught": f"{sum(map(vocabulary.misspelt, typos))}/{len(typos)}",
                         "typo_cases_missed": [q for q in typos if not vocabulary.misspelt(q)],
                         "other_cases_caught": f"{sum(map(vocabulary.misspelt, others))}/{len(others)}",
                         "other_cases_caught_list": [q for q in others if vocabulary.misspelt(q)]}
    return out


def policies(clinc_dir: Path | None, clinc_sample: int) -> dict:
    tasks = load_tasks_file(DEMO_TASKS)
    cases = load_cases_file(DEMO_CASES, {t.id for t in tasks})
    train, test = holdout_split(cases, 0.2, 42)
    out = {"demo held-out (0.2, seed 42)": {p: completion_score(tasks, train, test, p).as_dict() for p in CASE_QUERIES}}
    if clinc_dir is not None and (clinc_dir / "domains.json").exists():
        data = clinc150.load(clinc_dir)
        sample = random.Random(0).sample([c for c in data.test if c.gold], clinc_sample)
        out[f"CLINC150 val ({clinc_sample} in scope, seed 0)"] = {
            p: completion_score(data.tasks, data.train, sample, p).as_dict() for p in CASE_QUERIES}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spelling", action="store_true", help="the misspelling rule per Zipf bar")
    parser.add_argument("--bars", default="1.5,2.0,2.5", help="Zipf bars for --spelling")
    parser.add_argument("--clinc150", type=Path, default=ROOT.parent / "shared/data/clinc150")
    parser.add_argument("--clinc-sample", type=int, default=600)
    args = parser.parse_args(argv)
    if args.spelling:
        result = spelling([float(b) for b in args.bars.split(",")])
    else:
        result = policies(args.clinc150, args.clinc_sample)
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
