"""CLINC150 (Larson et al., EMNLP 2019) read as task discovery.

    intent label -> task   id = label, name = label with underscores as spaces, help = ""
                           (CLINC has no help text), category = its domain (domains.json)
    request      -> case   query = text, gold = [intent]; an `oos` request -> gold = [] (out of scope)

train.jsonl + oos_train.jsonl become the training cases (lexicon, pins, examples, CV for the
threshold); val.jsonl + oos_val.jsonl the evaluation cases. CLINC cases carry no rationale:
the lexicon learns only from the training requests' own words (build_lexicon links query terms
by default), so the "rationale" signal here is a term -> intent association learnt from 100
requests per intent, not from written explanations.

Duplicate request texts are dropped (first kept; the case store keys cases by query).

    python -m evaluation.clinc150 export DIR OUT_DIR [--max-per-intent N]
writes catalog.jsonl, train.jsonl and val.jsonl in the project's formats, for
`python app.py evaluate --catalog OUT/catalog.jsonl --cases OUT/train.jsonl --test-cases OUT/val.jsonl`.
"""
from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass
from pathlib import Path

from catalog.formats import write_catalog, write_jsonl
from catalog.records import CaseRecord, TaskRecord

OOS = "oos"


@dataclass(frozen=True)
class ClincData:
    tasks: list[TaskRecord]
    train: list[CaseRecord]
    test: list[CaseRecord]
    dropped_duplicates: int


def _rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load(directory: Path, max_per_intent: int | None = None, max_test_per_intent: int | None = None,
         sample_seed: int | None = None) -> ClincData:
    """`max_per_intent` caps the training requests per intent (0: zero-shot, names only); with
    `sample_seed` the kept ones are a random sample (seeded) instead of the first ones."""
    directory = Path(directory)
    domains = json.loads((directory / "domains.json").read_text(encoding="utf-8"))
    domain_of = {label: domain for domain, labels in domains.items() for label in labels}
    tasks = [TaskRecord(id=label, name=label.replace("_", " "), help="", category=domain_of[label])
             for label in sorted(domain_of)]
    seen: set[str] = set()
    dropped = 0

    def cases(files: list[str], cap: int | None) -> list[CaseRecord]:
        nonlocal dropped
        per_intent: dict[str, int] = {}
        out = []
        for name in files:
            rows = _rows(directory / name)
            if sample_seed is not None and cap is not None:
                random.Random(f"{sample_seed}:{name}").shuffle(rows)
            for row in rows:
                text, intent = row["text"].strip(), row["intent"]
                if not text:
                    continue
                if text in seen:
                    dropped += 1
                    continue
                if intent != OOS and intent not in domain_of:
                    raise ValueError(f"{name}: intent {intent!r} is not in domains.json")
                if cap is not None and per_intent.get(intent, 0) >= cap:
                    continue
                per_intent[intent] = per_intent.get(intent, 0) + 1
                seen.add(text)
                out.append(CaseRecord(query=text, gold=() if intent == OOS else (intent,)))
        return out

    train = cases(["train.jsonl", "oos_train.jsonl"], max_per_intent)
    test = cases(["val.jsonl", "oos_val.jsonl"], max_test_per_intent)
    return ClincData(tasks, train, test, dropped)


def export(directory: Path, out: Path, max_per_intent: int | None = None) -> dict:
    data = load(directory, max_per_intent)
    out.mkdir(parents=True, exist_ok=True)
    n_tasks = write_catalog(out / "catalog.jsonl", data.tasks)
    n_train = write_jsonl(out / "train.jsonl", (c.to_row() for c in data.train))
    n_val = write_jsonl(out / "val.jsonl", (c.to_row() for c in data.test))
    return {"tasks": n_tasks, "train": n_train, "val": n_val, "dropped_duplicates": data.dropped_duplicates}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.clinc150")
    sub = parser.add_subparsers(dest="command", required=True)
    exp = sub.add_parser("export", help="write catalog.jsonl, train.jsonl, val.jsonl")
    exp.add_argument("directory", type=Path)
    exp.add_argument("out", type=Path)
    exp.add_argument("--max-per-intent", type=int, default=None)
    args = parser.parse_args(argv)
    print(json.dumps(export(args.directory, args.out, args.max_per_intent)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
