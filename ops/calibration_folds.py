"""The abstention's calibration folds on CLINC150 (docs/abstention.md, "The budget on CLINC150").

    python ops/calibration_folds.py novelty --clinc150 ../shared/data/clinc150 [--embeddings]
    python ops/calibration_folds.py evaluate --clinc150 ../shared/data/clinc150 --folds range|contiguous

`novelty`: how unlike its fold's memory a held-out training case is under each fold assignment
(hash; blocks of the measured range; blocks as long as the folds allow, the shipped rule; each
fold one contiguous fifth of every task, the control), against val's queries and all of train:
the mean best term-Jaccard to a case of the same task, the share with an identical term set and,
with `--embeddings`, the mean and 5% quantile of the nearest same-task e5 cosine (~3 minutes
cold, CACHE_DIR reuses vectors).

`evaluate`: `app.py evaluate --drop-oos-train --config prefilter,prefilter_sparse` with the
calibration's blocks replaced: `range` (blocks of the measured range, the rule before
2026-11-26) or `contiguous` (the control). ~13 minutes with e5 vectors cached.
"""
from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from catalog.splits import bucket  # noqa: E402
from search.fitting import calibration as fitting  # noqa: E402  (its written_together_folds is what the fit calls)


def contiguous_folds(cases, folds: int, seed: int, length: int = 0) -> list[int]:
    """Each task's cases, in the suite's order, cut into `folds` contiguous parts, part j in fold
    (j + hash(task)) mod folds: every fold holds out exactly one fifth of every task."""
    assignment = [int(bucket(seed + 1, c.query) * folds) for c in cases]
    for task, indices in fitting._task_runs(cases).items():
        offset = int(bucket(seed + 1, task) * folds)
        for j, part in enumerate(np.array_split(np.asarray(indices), folds)):
            for i in part:
                assignment[int(i)] = (j + offset) % folds
    return assignment


def assignments(train) -> dict[str, list[int]]:
    folds, seed = fitting.FOLDS, 42
    measured, allowed = fitting.calibration_blocks(train)
    before = min(measured, allowed)    # the rule before 2026-11-26: the measured range, at most the folds' share
    return {"hash": fitting.written_together_folds(train, folds, seed, 1),
            f"blocks of the range ({before})": fitting.written_together_folds(train, folds, seed, before),
            f"blocks as long as the folds allow ({allowed})": fitting.written_together_folds(train, folds, seed, allowed),
            "contiguous fifths (control)": contiguous_folds(train, folds, seed)}


def novelty(clinc: str, embeddings: bool) -> None:
    from evaluation.clinc150 import load
    from lexicon.text import terms

    data = load(Path(clinc))
    train = [c for c in data.train if c.gold]
    val = [c for c in data.test if c.gold]
    runs = fitting._task_runs(train)
    term_sets = [frozenset(terms(c.query)) for c in train]
    vectors = val_vectors = None
    if embeddings:
        import diskcache

        from search.embeddings import build_embedder
        from settings import Settings

        settings = Settings.from_env()
        embedder = build_embedder(settings, diskcache.Cache(str(settings.cache_dir / "embeddings")))
        vectors = embedder.embed([c.query for c in train], "query")
        val_vectors = embedder.embed([c.query for c in val], "query")

    def report(name: str, best: list[float], cosines: list[float] | None) -> None:
        line = f"{name:48s} best Jaccard {np.mean(best):.3f}  identical terms {np.mean(np.asarray(best) >= 1):.3f}"
        if cosines is not None:
            line += f"  e5 nearest mean {np.mean(cosines):.4f}  5% quantile {np.quantile(cosines, 0.05):.4f}"
        print(line)

    for name, assignment in assignments(train).items():
        best, cosines = [], []
        for indices in runs.values():
            J = fitting._jaccard_matrix([term_sets[i] for i in indices])
            fold = np.array([assignment[i] for i in indices])
            C = vectors[indices] @ vectors[indices].T if vectors is not None else None
            for r in range(len(indices)):
                memory = fold != fold[r]
                best.append(float(J[r, memory].max()))
                if C is not None:
                    cosines.append(float(C[r, memory].max()))
        report(name, best, cosines if vectors is not None else None)
    best, cosines = [], []
    for k, case in enumerate(val):
        indices = runs[case.gold[0]]
        mine = frozenset(terms(case.query))
        best.append(max(len(mine & term_sets[i]) / max(len(mine | term_sets[i]), 1) for i in indices))
        if val_vectors is not None:
            cosines.append(float((vectors[indices] @ val_vectors[k]).max()))
    report("val (against all of train)", best, cosines if val_vectors is not None else None)


def evaluate(clinc: str, folds: str) -> None:
    if folds == "contiguous":
        fitting.written_together_folds = contiguous_folds
    else:   # the measured range, at most the folds' share: what calibration_queries used before 2026-11-26
        real = fitting.written_together_folds
        fitting.written_together_folds = lambda cases, k, seed, length: real(
            cases, k, seed, min(fitting.calibration_blocks(cases)))
    sys.argv = ["app.py", "evaluate", "--clinc150", clinc, "--drop-oos-train", "--config", "prefilter,prefilter_sparse"]
    runpy.run_path(str(ROOT / "app.py"), run_name="__main__")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("novelty")
    one.add_argument("--clinc150", required=True)
    one.add_argument("--embeddings", action="store_true")
    two = sub.add_parser("evaluate")
    two.add_argument("--clinc150", required=True)
    two.add_argument("--folds", choices=("range", "contiguous"), required=True)
    args = parser.parse_args(argv)
    if args.command == "novelty":
        novelty(args.clinc150, args.embeddings)
    else:
        evaluate(args.clinc150, args.folds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
