"""How far real traffic could take the refusal budget: the ceiling of learning from use.

Issue 31 item 4 asks for an in-scope refusal rate within budget *on real queries*, and names the
search log (clicked queries are in scope) as evidence once a deployment has traffic. Learning
from use can at best turn part of the real traffic into cases: what people clicked into in-scope
cases, what nobody clicked into negatives. This script measures that best case, so that the
product's learning is judged against it:

* the real held-out queries (`--test-cases`: in-scope ones with gold, off-topic ones with none)
  are split in two halves by a hash of the query (stable, no seed);
* for each half, `app.py evaluate` fits on the written cases plus the *other* half (in-scope
  and off-topic; with `--positives-only`, in-scope only, as if nothing marked the off-topic
  queries) and measures this half, unseen;
* the two halves' counts are pooled: in-scope refused and off-topic answered over all the real
  queries, each measured by a fit that never saw it.

    python ops/traffic_ceiling.py --catalog ../shared/data/hint3-sofmattress/catalog.jsonl \\
        --cases ../shared/data/hint3-sofmattress/train.jsonl \\
        --test-cases ../shared/data/hint3-sofmattress/test.jsonl [--positives-only]

Each half's fit takes about a minute on the 2-core VM (HINT3).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def halves(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """Split by the parity of the query's sha256: the same halves on every run and machine."""
    parts: tuple[list[dict], list[dict]] = ([], [])
    for row in rows:
        parts[int(hashlib.sha256(row["query"].encode("utf-8")).hexdigest(), 16) % 2].append(row)
    return parts


def evaluate(catalog: Path, train: Path, test: Path, out: Path) -> dict:
    command = [sys.executable, str(ROOT / "app.py"), "evaluate", "--catalog", str(catalog), "--cases", str(train),
               "--test-cases", str(test), "--config", "prefilter", "--json", str(out)]
    subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text(encoding="utf-8"))["configs"]["prefilter"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--catalog", type=Path, required=True)
    parser.add_argument("--cases", type=Path, required=True, help="the written cases")
    parser.add_argument("--test-cases", type=Path, required=True, help="real queries: gold [] for off-topic")
    parser.add_argument("--positives-only", action="store_true", help="learn the other half's in-scope queries only")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    written, real = read_jsonl(args.cases), read_jsonl(args.test_cases)
    parts = halves(real)
    pooled = {"in_scope": 0, "refused": 0, "off_topic": 0, "answered": 0, "hit@1": 0.0, "hit@5": 0.0}
    per_half = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (measured, learned) in enumerate(((parts[0], parts[1]), (parts[1], parts[0]))):
            taken = [row for row in learned if row["gold"] or not args.positives_only]
            train, test, out = Path(tmp, f"train{i}.jsonl"), Path(tmp, f"test{i}.jsonl"), Path(tmp, f"r{i}.json")
            write_jsonl(train, written + taken)
            write_jsonl(test, measured)
            row = evaluate(args.catalog, train, test, out)
            n, n_oos = row["n"], row["n_oos"]
            refused, answered = round(row["in_scope_abstain"] * n), round(row["oos_fpr"] * n_oos)
            per_half.append({"learned": len(taken), "in_scope": n, "off_topic": n_oos, "refused": refused,
                             "answered": answered, "hit@1": row["hit@1"], "hit@5": row["hit@5"]})
            pooled["in_scope"] += n
            pooled["off_topic"] += n_oos
            pooled["refused"] += refused
            pooled["answered"] += answered
            pooled["hit@1"] += row["hit@1"] * n
            pooled["hit@5"] += row["hit@5"] * n
    result = {"halves": per_half, "positives_only": args.positives_only,
              "in_scope_refused": round(pooled["refused"] / pooled["in_scope"], 4),
              "off_topic_answered": round(pooled["answered"] / pooled["off_topic"], 4),
              "hit@1": round(pooled["hit@1"] / pooled["in_scope"], 4),
              "hit@5": round(pooled["hit@5"] / pooled["in_scope"], 4),
              "counts": {k: pooled[k] for k in ("in_scope", "refused", "off_topic", "answered")}}
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
