""""No confident match": a calibrated minimum confidence below which the system answers nothing.

Candidate features of the prefilter's answer (all computed from the fused scores):

    top_score  the top task's fused score (Eq. 2)
    margin     top-1 score minus top-2 score
    evidence   the top task's lexical + rationale + typo contributions, i.e. the fused score
               without the embedding, whose min-max normalisation always hands *some* task a 1.0
               and therefore says little about whether anything in the catalog fits.

A query whose top result is pinned (a training case with the same terms) is always answered.

Fitting (training split only): the training cases' cross-validated signal blocks (evaluation.cv)
give, per case, the feature value, whether the case is out of scope (empty gold) and whether
the gold is in the top 5. For a threshold t the system answers when feature >= t. The rule is
a budgeted operating point: among thresholds whose CV in-scope Hit@5 (counted only when
answered) stays within `max_hit_loss` (default 0.02, two points) of answering everything, take
the one with the lowest OOS FPR (share of out-of-scope cases answered); ties: the lowest t,
which keeps more answers. In-scope queries vastly outnumber out-of-scope ones in use, so the
budget is on the in-scope loss; a balanced objective (Hit@5 - FPR) abstained on a third of the
in-scope CV queries of the demo data. Candidate thresholds are midpoints between consecutive
observed values. The feature is the one with the lowest FPR at its budgeted point (ties: higher
Hit@5, then higher ROC AUC in-scope vs out-of-scope; AUCs are reported as the justification).
With no out-of-scope training case nothing is fitted.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from settings import Weights

from .fastrank import SignalBlock

FEATURES = ("top_score", "margin", "evidence")
SPARSE = ("lexical", "rationale", "typo")


@dataclass(frozen=True)
class Sample:
    value: dict[str, float]
    pinned: bool
    oos: bool
    hit5: bool


@dataclass(frozen=True)
class Threshold:
    feature: str | None
    value: float | None
    max_hit_loss: float
    cv: dict          # J, hit@5 kept, oos_fpr at the chosen value (training CV)
    auc: dict[str, float | None]
    n_in_scope: int
    n_oos: int

    def answers(self, features: dict[str, float], pinned: bool) -> bool:
        if self.feature is None or pinned:
            return True
        return features[self.feature] >= self.value

    def as_dict(self) -> dict:
        return {"feature": self.feature, "value": self.value, "max_hit_loss": self.max_hit_loss, "cv": self.cv,
                "auc": self.auc, "n_in_scope": self.n_in_scope, "n_oos": self.n_oos}


def block_features(block: SignalBlock, weights: Weights, use_pins: bool, k: int = 5) -> tuple[dict, bool, list[str]]:
    fused, w = block.fused(weights)
    ranking = block.rank(weights, k, use_pins)
    if not ranking:
        return {f: float("-inf") for f in FEATURES}, False, []
    top = block.task_ids.index(ranking[0])
    second = float(fused[block.task_ids.index(ranking[1])]) if len(ranking) > 1 else 0.0
    evidence = sum(w[name] * float(block.values[name][top]) for name in SPARSE if name in block.values)
    features = {"top_score": float(fused[top]), "margin": float(fused[top]) - second, "evidence": evidence}
    return features, bool(use_pins and ranking[0] in block.pinned), ranking


def samples_from_cv(cv_queries, weights: Weights, use_pins: bool) -> list[Sample]:
    out = []
    for q in cv_queries:
        features, pinned, ranking = block_features(q.block, weights, use_pins)
        gold = set(q.case.gold)
        out.append(Sample(features, pinned, not gold, bool(gold & set(ranking[:5]))))
    return out


def auc(positives: Sequence[float], negatives: Sequence[float]) -> float | None:
    """P(positive > negative) + 0.5 P(tie): the Mann-Whitney form of ROC AUC."""
    if not positives or not negatives:
        return None
    p, n = np.asarray(positives, dtype=float), np.asarray(negatives, dtype=float)
    greater = (p[:, None] > n[None, :]).sum()
    ties = (p[:, None] == n[None, :]).sum()
    return float((greater + 0.5 * ties) / (p.size * n.size))


def operating_point(samples: Sequence[Sample], feature: str, t: float) -> dict:
    ins = [s for s in samples if not s.oos]
    oos = [s for s in samples if s.oos]
    answered = [s.pinned or s.value[feature] >= t for s in samples]
    hit_kept = [a and s.hit5 for s, a in zip(samples, answered) if not s.oos]
    fpr = [a for s, a in zip(samples, answered) if s.oos]
    abstain = [not a for s, a in zip(samples, answered) if not s.oos]
    return {"threshold": t,
            "hit@5": float(np.mean(hit_kept)) if ins else None,
            "oos_fpr": float(np.mean(fpr)) if oos else None,
            "in_scope_abstain": float(np.mean(abstain)) if ins else None}


def candidates(samples: Sequence[Sample], feature: str) -> list[float]:
    values = sorted({s.value[feature] for s in samples if np.isfinite(s.value[feature])})
    mids = [(a + b) / 2.0 for a, b in zip(values, values[1:])]
    below = [values[0] - 1e-6] if values else []
    above = [values[-1] + 1e-6] if values else []
    return below + mids + above


def curve(samples: Sequence[Sample], feature: str) -> list[dict]:
    return [operating_point(samples, feature, t) for t in candidates(samples, feature)]


def fit(samples: Sequence[Sample], max_hit_loss: float = 0.02) -> Threshold:
    ins = [s for s in samples if not s.oos]
    oos = [s for s in samples if s.oos]
    aucs = {f: auc([s.value[f] for s in ins], [s.value[f] for s in oos]) for f in FEATURES}
    if not ins or not oos:
        return Threshold(None, None, max_hit_loss, {}, aucs, len(ins), len(oos))
    base_hit = float(np.mean([s.hit5 for s in ins]))
    best = None
    for order, feature in enumerate(FEATURES):
        for t in candidates(samples, feature):
            point = operating_point(samples, feature, t)
            if point["hit@5"] < base_hit - max_hit_loss - 1e-12:
                continue
            key = (-point["oos_fpr"], point["hit@5"], aucs[feature] or 0.0, -order, -t)
            if best is None or key > best[0]:
                best = (key, feature, t, dict(point, hit5_answer_all=base_hit))
    _, feature, t, point = best
    return Threshold(feature, float(t), max_hit_loss, point, aucs, len(ins), len(oos))


def apply(rows, threshold: Threshold) -> dict:
    """Operating point of a run's QueryRuns (rows with .features and .extra['pinned'])."""
    samples = [Sample(r.features, bool(r.extra.get("pinned")), not r.gold, bool(set(r.gold) & set(r.ranking[:5])))
               for r in rows]
    if threshold.feature is None:
        oos = [s for s in samples if s.oos]
        return {"threshold": None, "hit@5": None, "oos_fpr": 1.0 if oos else None, "in_scope_abstain": 0.0}
    return operating_point(samples, threshold.feature, threshold.value)


def samples_of_rows(rows) -> list[Sample]:
    return [Sample(r.features, bool(r.extra.get("pinned")), not r.gold, bool(set(r.gold) & set(r.ranking[:5])))
            for r in rows]
