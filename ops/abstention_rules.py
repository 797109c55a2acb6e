"""Threshold rules for the abstention, compared on one CLINC150 evaluation (docs/abstention.md,
"Tried and not shipped"). Runs `app.py evaluate` with two read-only taps: the abstention fit's
cross-fitted calibration data (features, folds, out-of-fold logits of search.fitting._cross_fitted)
and the features of every held-out answer (evaluation.replay.assess). Then, per mode, the share of
val's in-scope queries each rule refuses and the share of out-of-scope queries it answers:

    served           the fitted model's logit >= the conformal threshold (what the product does)
    cross-conformal  each fold model scores the query against its own fold's calibration scores
    training-conditional  the largest k with BetaCDF(budget; k, n + 1 - k) >= 1 - delta (Vovk 2012)
    plain targets    the conformal threshold at a lower target

and how val's refusals spread over the intents (their variance against independent queries').

    python ops/abstention_rules.py --clinc150 ../shared/data/clinc150 [--pickle FILE]

(~15 minutes: the full CLINC150 evaluation with `--drop-oos-train`, configurations prefilter and
prefilter_sparse; `--pickle` keeps the captured data, and with an existing file only re-analyses.)
"""
from __future__ import annotations

import argparse
import collections
import pickle
import runpy
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def capture(clinc: str) -> dict:
    import evaluation.replay as replay
    import search.fitting.abstention as fitting   # the module whose fit_abstention and _cross_fitted the fit calls
    from search.confidence import answer_features

    captured: dict = {"fits": [], "heldout": []}
    cross_fitted, fit_abstention, assess = fitting._cross_fitted, fitting.fit_abstention, replay.assess

    def tap_cross_fitted(X, y, folds, weight):
        l2, logits = cross_fitted(X, y, folds, weight)
        captured["fits"].append({"X": X, "y": y, "folds": folds, "weight": weight, "l2": l2, "logits": logits})
        return l2, logits

    def tap_fit_abstention(queries, weights, mode, budget=0.05, signals=None):
        before = len(captured["fits"])
        model = fit_abstention(queries, weights, mode, budget, signals)
        if len(captured["fits"]) > before and model is not None:
            captured["fits"][-1].update(mode=mode, model=model.as_dict())
        return model

    def tap_assess(result, model):
        confidence = assess(result, model)
        captured["heldout"].append({"mode": result.mode, "features": answer_features(result),
                                    "pinned": bool(result.ranked and result.ranked[0].pinned),
                                    "top": result.ranked[0].task.id if result.ranked else None,
                                    "answer": confidence.answer})
        return confidence

    fitting._cross_fitted, fitting.fit_abstention, replay.assess = tap_cross_fitted, tap_fit_abstention, tap_assess
    sys.argv = ["app.py", "evaluate", "--clinc150", clinc, "--drop-oos-train", "--config", "prefilter,prefilter_sparse"]
    try:
        runpy.run_path(str(ROOT / "app.py"), run_name="__main__")
    except SystemExit:
        pass
    return captured


def analyse(captured: dict, clinc: str, budget: float = 0.05) -> None:
    from scipy.stats import beta

    from evaluation.clinc150 import load
    from search.fitting import _logistic, conformal_threshold

    test = load(Path(clinc)).test
    gold = np.array([bool(c.gold) for c in test])
    for fit in (f for f in captured["fits"] if "mode" in f):
        mode = fit["mode"]
        rows = [h for h in captured["heldout"] if h["mode"] == mode][:len(test)]
        names, model = fit["model"]["features"], fit["model"]
        Xt = np.array([[h["features"].get(n, 0.0) for n in names] for h in rows])
        pinned = np.array([h["pinned"] for h in rows])
        X, y, folds, weight, l2, oof = (fit[k] for k in ("X", "y", "folds", "weight", "l2", "logits"))
        ins = y > 0.5
        served = Xt @ np.array(model["coef"]) + model["intercept"]

        def show(rule: str, refuse: np.ndarray) -> None:
            refuse = refuse & ~pinned
            print(f"{mode:6} {rule:44} refused {refuse[gold].mean():.4f}  out-of-scope answered "
                  f"{(~refuse[~gold]).mean():.3f}")

        show("served", served < model["threshold"])
        counts = np.zeros(len(rows))
        for k in np.unique(folds):
            coef, intercept = _logistic(X[folds != k], y[folds != k], l2, weight[folds != k])
            counts += np.searchsorted(np.sort(oof[ins & (folds == k)]), Xt @ coef + intercept, side="right")
        show("cross-conformal", (1 + counts) / (ins.sum() + 1) <= budget)
        n, ks = int(ins.sum()), np.arange(1, int(ins.sum()) + 1)
        for delta in (0.2, 0.1, 0.05):
            ok = ks[beta.cdf(budget, ks, n + 1 - ks) >= 1 - delta]
            threshold = np.sort(oof[ins])[ok.max() - 1] if ok.size else -np.inf
            show(f"training-conditional delta={delta}", served < threshold)
        for target in (0.048, 0.046):
            show(f"plain target {target}", served < conformal_threshold(oof[ins], target))
        refused = collections.Counter(c.gold[0] for c, h in zip(test, rows) if c.gold and not h["answer"])
        per_intent = np.array([refused.get(i, 0) for i in sorted({c.gold[0] for c in test if c.gold})])
        print(f"{mode:6} refusals on {len(refused)} intents, most: {refused.most_common(3)}; per-intent variance "
              f"{per_intent.var():.2f} against {per_intent.mean():.2f} for independent queries")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clinc150", required=True)
    parser.add_argument("--pickle", type=Path, default=None, help="keep (or reuse) the captured data here")
    args = parser.parse_args()
    if args.pickle is not None and args.pickle.exists():
        captured = pickle.loads(args.pickle.read_bytes())
    else:
        captured = capture(args.clinc150)
        if args.pickle is not None:
            args.pickle.write_bytes(pickle.dumps(captured))
    analyse(captured, args.clinc150)
    return 0


if __name__ == "__main__":
    sys.exit(main())
