"""How often a pin puts a wrong task first, under the old key (stemmed term set) and the current
one (whole normalised text): training cases make the pins, validation queries are looked up.

    python -m evaluation.pins ../shared/data/clinc150
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from lexicon.rationale import pin_key
from lexicon.text import terms

from . import clinc150


def term_set_key(query: str) -> frozenset[str]:
    """The key pins used before: the query's stemmed, stopword-free terms, order ignored."""
    return frozenset(terms(query))


def pin_accuracy(train, test, key) -> dict:
    pins: dict = defaultdict(list)
    for case in train:
        if case.gold and key(case.query):
            pins[key(case.query)].extend(g for g in case.gold if g not in pins[key(case.query)])
    fired = [(case, pins[key(case.query)]) for case in test if pins.get(key(case.query))]
    in_scope = [(case, gold) for case, gold in fired if case.gold]
    wrong = sum(1 for case, gold in in_scope if gold[0] not in case.gold)
    return {"fired_in_scope": len(in_scope), "wrong_first": wrong,
            "wrong_share": round(wrong / len(in_scope), 4) if in_scope else None,
            "fired_out_of_scope": len(fired) - len(in_scope)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.pins")
    parser.add_argument("clinc_dir", type=Path)
    args = parser.parse_args(argv)
    data = clinc150.load(args.clinc_dir)
    print(json.dumps({"term_set (before)": pin_accuracy(data.train, data.test, term_set_key),
                      "exact text (now)": pin_accuracy(data.train, data.test, pin_key)}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
