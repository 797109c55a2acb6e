"""Completions in a catalog with names in more than one language, keystroke by keystroke.

Each held-out query of the language dev sets (evaluation/data/languages/headstart_heldout_*.jsonl)
is typed from its third character on (evaluation.prefixes.keystroke_cases); each cut is read as
the search reads it (search.query.query_language, with the page's language where the set says
one) and its completions asked in that language (search.completions.Completions.complete).
Printed per set: keystrokes, then for three orders of the suggestions the share of keystrokes
with a completion leading to a gold task (lead@5) and the share offered one written in a third
language (neither the catalog's nor the text's):

    as before    every suggestion in one order, whatever its language (the entries' languages
                 set to the catalog's: what the lookup did before it knew languages)
    hidden       a third language's suggestions left out
    last         a third language's suggestions after the others (the product's order)

    python ops/measure_completion_languages.py --catalog /tmp/catalog_es.jsonl

(/tmp/catalog_es.jsonl: the demo catalog with evaluation/data/languages/headstart_aliases_es.jsonl
added, docs/results.md "Spanish aliases written in the editor" shows how.) Trains on the
training part of the demo's seed-42 hash holdout, as `app.py evaluate --train-split` does.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from catalog.demo import DEMO_CASES, DEMO_CATALOG  # noqa: E402
from catalog.formats import load_cases_file, load_tasks_file  # noqa: E402
from catalog.splits import holdout_split  # noqa: E402
from evaluation.prefixes import keystroke_cases  # noqa: E402
from lexicon.language import CATALOG_LANGUAGE  # noqa: E402
from lexicon.rationale import build_lexicon  # noqa: E402
from search.completions import Completions  # noqa: E402
from search.index import build_index  # noqa: E402
from search.query import query_language  # noqa: E402
from settings import PROJECT_ROOT, FieldWeights  # noqa: E402

SETS = (("en", None), ("es", "es"), ("pt", "pt"))


def measure(catalog: Path, cases_path: Path, sets=SETS) -> dict[str, dict]:
    tasks = load_tasks_file(catalog)
    ids = {t.id for t in tasks}
    cases = load_cases_file(cases_path, ids)
    out = {}
    for language, page in sets:
        test = load_cases_file(PROJECT_ROOT / "evaluation" / "data" / "languages" / f"headstart_heldout_{language}.jsonl", ids)
        held = {c.query for c in test}
        train = [c for c in holdout_split(cases, 0.2, 42)[0] if c.query not in held]
        index = build_index(tasks, build_lexicon(train), FieldWeights(), cases=train)
        every = frozenset(role for task in tasks for role in task.roles)
        completions = Completions(tasks, train)
        before = Completions(tasks, train)
        view = before.view(every)
        view.entries = tuple(replace(e, language=CATALOG_LANGUAGE) for e in view.entries)
        language_of = {e.text: e.language for e in completions.view(every).entries}
        counts = {"as before": [0, 0], "hidden": [0, 0], "last": [0, 0]}
        keystrokes = 0
        for _, cut in keystroke_cases(test):
            read = query_language(index, cut.query, finished=cut.query.endswith(" "), page_language=page)
            gold = set(cut.gold)
            last = completions.complete(cut.query, every, language=read)
            third = [c for c in last if language_of.get(c.text, CATALOG_LANGUAGE) not in (CATALOG_LANGUAGE, read)]
            for name, offered in (("as before", before.complete(cut.query, every)),
                                  ("hidden", [c for c in last if c not in third]), ("last", last)):
                counts[name][0] += any(c.tasks & gold for c in offered)
                counts[name][1] += any(language_of.get(c.text, CATALOG_LANGUAGE) not in (CATALOG_LANGUAGE, read)
                                       for c in offered)
            keystrokes += 1
        out[f"{language} (page {page or '-'})"] = {"keystrokes": keystrokes, **{
            name: (round(lead / keystrokes, 3), round(shown / keystrokes, 3)) for name, (lead, shown) in counts.items()}}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--catalog", type=Path, default=DEMO_CATALOG)
    parser.add_argument("--cases", type=Path, default=DEMO_CASES)
    args = parser.parse_args(argv)
    for name, row in measure(args.catalog, args.cases).items():
        print(name, row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
