"""The shipped generic off-topic memory: public, catalog-independent queries that no enterprise
task catalog answers ("tell me a joke", "who wrote hamlet", "can you write bubble sort?").

They are NEGATIVE evidence for abstention (search.fitting.fit_abstention): scored against each
catalog exactly like its held-out test cases, they show the abstention model what the top answer
to an off-topic query looks like in THIS catalog, so it can say "no confident match" before the
customer has written a single out-of-scope case. They never decide the threshold: that is set
on the catalog's own in-scope cases (the in-scope budget), so a generic query that happens to be
in scope for some catalog can blur the model's direction but cannot make it refuse more than
the budget of answerable queries.

Source: the English part of the ChatterBot dialog corpus (chatterbot-corpus 1.3.3 on PyPI,
github.com/gunthercox/chatterbot-corpus, BSD 3-Clause licence): the first (user) utterance of
every conversation, whitespace-collapsed, de-duplicated case-insensitively, with the corpus file
as category (749 queries). It is NOT derived from CLINC150, so CLINC150 figures measured with it
carry no leakage from CLINC's out-of-scope requests. Rebuild:

    pip download chatterbot-corpus==1.3.3 --no-deps -d /tmp/cc && unzip -q /tmp/cc/*.whl -d /tmp/cc
    python -m search.offtopic /tmp/cc/chatterbot_corpus/data/english search/data/offtopic_en.jsonl
"""
from __future__ import annotations

import argparse
import json
from functools import lru_cache
from pathlib import Path

OFFTOPIC_PATH = Path(__file__).resolve().parent / "data" / "offtopic_en.jsonl"


@lru_cache(maxsize=4)
def load_offtopic(path: Path = OFFTOPIC_PATH) -> tuple[str, ...]:
    """The memory's queries, in file order (empty when the file is missing)."""
    if not path.exists():
        return ()
    rows = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    return tuple(row["query"] for row in rows)


def build(corpus_dir: Path) -> list[dict]:
    """First utterance of each conversation of every `*.yml` file, de-duplicated (case-folded)."""
    import yaml  # only for rebuilding the shipped file

    seen: dict[str, dict] = {}
    for path in sorted(Path(corpus_dir).glob("*.yml")):
        document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for conversation in document.get("conversations") or []:
            if conversation and isinstance(conversation[0], str):
                text = " ".join(conversation[0].split())
                if text:
                    seen.setdefault(text.casefold(), {"query": text, "category": path.stem})
    return list(seen.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m search.offtopic")
    parser.add_argument("corpus_dir", type=Path, help="chatterbot_corpus/data/english of the unpacked wheel")
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    rows = build(args.corpus_dir)
    args.out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    print(f"{len(rows)} queries -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
