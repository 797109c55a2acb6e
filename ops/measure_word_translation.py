"""A dead end of issue 46, measured: translate a Spanish query word by word into the catalog's
language with a dictionary the embedding model itself induces, and rank the translation.

Nothing offline translates: the machine reaches PyPI only, the translation libraries there
(argostranslate, offline-translate, EasyNMT) download their models at run time, and the local
LLM (Gemma 3 270M, a smoke-test model) answers "Translate this Spanish search query into
English" by echoing the prompt. What the product has is multilingual-e5-small, and word
translation without parallel data (Conneau et al. 2018, "Word translation without parallel
data", ICLR: cross-domain similarity local scaling) induces a dictionary from any two monolingual
vocabularies embedded in one space:

    CSLS(s, t) = 2 cos(s, t) - r_T(s) - r_S(t),   r_T(s) = mean of cos(s, t') over the k = 10
                 nearest target words t' of s (r_S(t) likewise over source words)

    translation(s) = argmax_t CSLS(s, t)

over the N most frequent words of each language (`wordfreq`, a PyPI package with its word lists
inside the wheel; not a dependency of the product: `pip install wordfreq` to run this). Each
query word is then replaced by its translation (stop words of its language dropped; digits and
words the catalog's own text uses kept as typed), and the translated file is ranked by
`python app.py evaluate` as an English query, alone and fused with the Spanish query's own
ranking (reciprocal rank fusion, 1 / (60 + rank), the translation's ranking weighted by w).

    pip install wordfreq
    python ops/measure_word_translation.py                       # the tune set, Spanish, N = 25,000
    python ops/measure_word_translation.py --words 2000 --probe niños,vacunas,maestra

Measured on the tune set only (evaluation/data/languages/tune_headstart_seed7_es.jsonl; the
demo fitted on the seed-7 training split), figures in docs/results.md ("Queries in other
languages", dead ends). The dictionary and translated file are written under --out.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from catalog.formats import load_tasks_file  # noqa: E402
from evaluation.metrics import hit_at, reciprocal_rank  # noqa: E402
from lexicon.language import STOPWORDS, stop_words  # noqa: E402
from lexicon.normalise import WORD, normalise  # noqa: E402
from search.embeddings import LocalE5Embedder  # noqa: E402

LANGUAGES = ROOT / "evaluation" / "data" / "languages"
CATALOG = ROOT / "catalog" / "data" / "headstart_catalog.jsonl"
CASES = ROOT / "catalog" / "data" / "headstart_cases.jsonl"
NEIGHBOURS = 10      # k of CSLS (Conneau et al. 2018 use 10)
RRF_K = 60           # reciprocal rank fusion's constant (Cormack et al. 2009)


def vocabulary(language: str, size: int) -> list[str]:
    """The `size` most frequent words of `language` (wordfreq), letters only, two or more."""
    try:
        from wordfreq import top_n_list
    except ImportError:
        sys.exit("this measurement needs wordfreq's word lists: pip install wordfreq")
    return [w for w in top_n_list(language, size) if w.isalpha() and len(w) > 1]


def csls_dictionary(source: np.ndarray, target: np.ndarray, chunk: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """For each source row, its best target row by CSLS and that CSLS value (module docstring).
    Rows are unit vectors; done in chunks to keep the similarity matrix small."""
    r_source = np.empty(len(target), dtype=np.float32)     # r_S(t): each target's k nearest sources
    for start in range(0, len(target), chunk):
        sims = target[start:start + chunk] @ source.T
        r_source[start:start + chunk] = np.sort(sims, axis=1)[:, -NEIGHBOURS:].mean(axis=1)
    best = np.empty(len(source), dtype=np.int64)
    value = np.empty(len(source), dtype=np.float32)
    for start in range(0, len(source), chunk):
        sims = source[start:start + chunk] @ target.T
        r_target = np.sort(sims, axis=1)[:, -NEIGHBOURS:].mean(axis=1)
        csls = 2 * sims - r_target[:, None] - r_source[None, :]
        best[start:start + chunk] = csls.argmax(axis=1)
        value[start:start + chunk] = csls.max(axis=1)
    return best, value


def induce(language: str, size: int) -> dict[str, tuple[str, float]]:
    """Folded source word -> (English word, CSLS), the most confident where two words fold alike."""
    embedder = LocalE5Embedder()
    source_words, target_words = vocabulary(language, size), vocabulary("en", size)
    print(f"embedding {len(source_words)} {language} and {len(target_words)} en words", file=sys.stderr)
    best, value = csls_dictionary(embedder.embed(source_words, "query"), embedder.embed(target_words, "query"))
    dictionary: dict[str, tuple[str, float]] = {}
    for word, j, score in zip(source_words, best, value):
        folded = normalise(word)
        if folded not in dictionary or score > dictionary[folded][1]:
            dictionary[folded] = (target_words[j], float(score))
    return dictionary


def catalog_words() -> set[str]:
    """Every folded word of the demo catalog's own text (names, help, aliases)."""
    found: set[str] = set()
    for task in load_tasks_file(CATALOG):
        for text in (task.name, task.help or "", *task.aliases):
            found.update(WORD.findall(normalise(text)))
    return found


def translate(query: str, language: str, dictionary: dict[str, tuple[str, float]], known: set[str]) -> str:
    """`query` word by word (module docstring); a word the dictionary lacks is kept as typed."""
    out = []
    for word in WORD.findall(normalise(query)):
        if word in stop_words(language):
            continue
        if word in known or word.isdigit() or word not in dictionary:
            out.append(word)
        else:
            out.append(dictionary[word][0])
    return " ".join(w for w in out if w not in STOPWORDS) or query


def evaluate(test_cases: Path, out: Path, seed: int) -> None:
    subprocess.run([sys.executable, "app.py", "evaluate", "--catalog", str(CATALOG), "--cases", str(CASES),
                    "--test-cases", str(test_cases), "--train-split", "--seed", str(seed), "--config", "prefilter",
                    "--out", str(out), "--no-progress"], cwd=ROOT, check=True)


def read_run(path: Path) -> dict[str, list[str]]:
    ranking: dict[str, list[str]] = defaultdict(list)
    for line in path.read_text(encoding="utf-8").splitlines():
        qid, _, task, *_ = line.split()
        ranking[qid].append(task)
    return ranking


def read_qrels(path: Path) -> dict[str, set[str]]:
    gold: dict[str, set[str]] = defaultdict(set)
    for line in path.read_text(encoding="utf-8").splitlines():
        qid, _, task, relevance = line.split()
        if int(relevance) > 0:
            gold[qid].add(task)
    return gold


def hit1_mrr(rankings: dict[str, list[str]], gold: dict[str, set[str]]) -> tuple[float, float]:
    """Hit@1 and MRR over the in-scope queries (those with a gold task): evaluation.metrics."""
    return (sum(hit_at(rankings.get(q, []), tasks, 1) for q, tasks in gold.items()) / len(gold),
            sum(reciprocal_rank(rankings.get(q, []), tasks) for q, tasks in gold.items()) / len(gold))


def fuse(first: dict[str, list[str]], second: dict[str, list[str]], weight: float) -> dict[str, list[str]]:
    fused = {}
    for qid in first.keys() | second.keys():
        score: dict[str, float] = defaultdict(float)
        for rank, task in enumerate(first.get(qid, [])):
            score[task] += 1 / (RRF_K + rank)
        for rank, task in enumerate(second.get(qid, [])):
            score[task] += weight / (RRF_K + rank)
        fused[qid] = sorted(score, key=lambda t: -score[t])
    return fused


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--language", default="es")
    parser.add_argument("--words", type=int, default=25_000, help="N: each language's most frequent words")
    parser.add_argument("--test-cases", type=Path, default=LANGUAGES / "tune_headstart_seed7_es.jsonl")
    parser.add_argument("--seed", type=int, default=7, help="the --train-split seed of --test-cases")
    parser.add_argument("--out", type=Path, default=ROOT / "instance" / "word-translation")
    parser.add_argument("--probe", default="", help="comma-separated words: print their translations and stop")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    dictionary = induce(args.language, args.words)
    (args.out / f"dictionary_{args.language}.json").write_text(json.dumps(dictionary, ensure_ascii=False), encoding="utf-8")
    if args.probe:
        for word in args.probe.split(","):
            print(word, "->", dictionary.get(normalise(word), "(not among the words)"))
        return
    known = catalog_words()
    translated = args.out / f"translated_{args.test_cases.name}"
    with args.test_cases.open(encoding="utf-8") as source, translated.open("w", encoding="utf-8") as sink:
        for line in source:
            case = json.loads(line)
            sink.write(json.dumps({**case, "query": translate(case["query"], args.language, dictionary, known)},
                                  ensure_ascii=False) + "\n")
    evaluate(args.test_cases, args.out / "as-typed", args.seed)
    evaluate(translated, args.out / "translated", args.seed)
    gold = read_qrels(args.out / "as-typed" / "qrels.txt")
    typed = read_run(args.out / "as-typed" / "run.prefilter.txt")
    words = read_run(args.out / "translated" / "run.prefilter.txt")
    print(f"{'ranking':44s} Hit@1   MRR")
    for label, rankings in [("as typed", typed), ("translated word by word", words)] + [
            (f"fused, translation weighted {w}", fuse(typed, words, w)) for w in (0.25, 0.5, 1.0)]:
        hit, mrr = hit1_mrr(rankings, gold)
        print(f"{label:44s} {hit:.3f}  {mrr:.3f}")
    print(f"translations: {translated}")


if __name__ == "__main__":
    main()
