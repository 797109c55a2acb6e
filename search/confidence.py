"""Is this a confident match? The one place that decides, for every caller.

Two questions, one set of evidence (the features of the prefilter's top answer):

- **Abstain** ("no confident match"): answer nothing rather than a wrong task. A logistic model
  over ABSOLUTE evidence of the top task: raw cosines to its text, centroid and nearest exemplar,
  that nearest-exemplar cosine against the task's own exemplar spread (`neighbour_gap`, local
  geometry: search.exemplars.typical_neighbour), raw lexical and exemplar scores, the share of
  the query's words the catalog knows (`coverage`), the margin to the runner-up, and how much
  closer the query is to a written out-of-scope case than to the task's nearest exemplar. Fitted
  per catalog (search.fitting.fit_abstention) on its in-scope cases against whatever negatives
  exist: its own out-of-scope cases, the shipped generic off-topic memory (search.offtopic) and
  queries that repeatedly ended without a click; one model per mode (with and without
  embeddings). Its features are declared by the signals that inform them
  (Signal.abstention_features, search/signal/: `features_for_mode`), beside the ranking's own
  (RANKING_FEATURES); a fitted model keeps its coefficients by feature name. Its threshold is
  calibrated on the in-scope cases ALONE (split-conformal on their cross-validated scores): at
  most the stated budget (ABSTAIN_BUDGET, 5%) of answerable queries is refused, however few or
  many negatives there are. Cases written in runs (an author's five
  paraphrases sharing a slot value) are kept in one fold for that calibration, so a held-out
  case never has its run-mates in memory: it scores as a new author's query will
  (search.fitting.written_together_range, calibration_queries). With no negative at all the score is the
  one-class evidence itself (nearest-exemplar cosine; exemplar BM25 without embeddings).
  A pinned answer (a test case with this very query) is always given; without embeddings, a
  query none of whose words points at any task is never answered; with no fitted model (the
  shipped defaults, before a catalog has enough cases for a fit) everything else is answered.
- **Skip the LLM**: the re-ranker is not called when the top task's probability (softmax of the
  fused scores) is at least RERANK_SKIP_PROBABILITY: the prefilter is already sure.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from search.signal import MODES, REGISTRY, Signal
from search.typed import TYPED_WHOLE

if TYPE_CHECKING:
    from search.prefilter import PrefilterResult

# The signals whose value says a query word points at a task (Signal.abstention_evidence,
# search/signal/): the sparse ones, and the typing ones, present only for a query still being typed.
SPARSE_EVIDENCE = tuple(s.name for s in REGISTRY if s.abstention_evidence and s.family == "sparse")
TYPING_EVIDENCE = tuple(s.name for s in REGISTRY if s.abstention_evidence and s.family == "typing")
#: The features no signal declares: of the query, the share of its words the catalog knows
#: (`coverage`, search.query.query_coverage), and of the ranking, the top answer's probability and
#: its score's margin to the runner-up.
RANKING_FEATURES = ("coverage", "probability", "margin")
#: The column order the models fitted so far were fitted in, the shipped demo fit's among them
#: (catalog/data/headstart_fit.json). A model reads its features by name, so any order decides
#: alike; but the fit's numbers depend on its column order in their last bits (the sums of
#: its L-BFGS steps), and a fresh fit of the demo must equal the shipped one to the bit
#: (tests/test_shipped_fit.py). So the features fitted before keep their places, and a feature a
#: new signal declares follows them, in registry order (features_for_mode). Not a list to edit:
#: which features exist is the registry's.
FITTED_ORDER = {"full": ("neighbour", "neighbour_gap", "embedding", "centroid", "sparse_evidence", "coverage",
                         "probability", "margin", "oos_gap"),
                "sparse": ("lexical", "rationale", "exemplar", "typo", "coverage", "probability", "margin")}
# The score when a catalog has no negative evidence at all: the one-class evidence alone.
ONE_CLASS_FEATURE = {"full": "neighbour", "sparse": "exemplar"}


def features_for_mode(mode: str, registry: Sequence[Signal] = REGISTRY) -> tuple[str, ...]:
    """The features of `mode`'s abstention model (MODES): those the signals of `registry`
    declare for it (Signal.abstention_features), each once, and RANKING_FEATURES; a fit's
    columns, in this order: those of FITTED_ORDER in its order, then the others in registry
    order. A fitted model reads them by name."""
    declared = (f.name for signal in registry for f in signal.abstention_features if mode in f.modes)
    names = tuple(dict.fromkeys(declared)) + RANKING_FEATURES
    fitted = FITTED_ORDER.get(mode, ())
    return tuple(sorted(names, key=lambda name: fitted.index(name) if name in fitted else len(fitted)))


assert all(ONE_CLASS_FEATURE[mode] in features_for_mode(mode) for mode in MODES)


def answer_features(result: "PrefilterResult", registry: Sequence[Signal] = REGISTRY) -> dict[str, float]:
    """Evidence about the top answer, all of it absolute (comparable between queries): each
    feature the signals of `registry` declare (Signal.abstention_features), where the signal has
    a value at the top answer (the dense ones with embeddings only), a feature several signals
    declare as the sum of theirs; then RANKING_FEATURES."""
    if not result.ranked:
        return {}
    top = result.ranked[0]
    second = result.ranked[1].score if len(result.ranked) > 1 else top.score
    signals = {name: (value if value is not None else 0.0) for name, value in top.signals.items()}
    out = {"probability": top.probability, "margin": top.score - second}
    for signal in registry:
        if top.signals.get(signal.name) is None:   # unavailable in this mode: informs nothing
            continue
        for feature in signal.abstention_features:
            value = signals[signal.name] if feature.value is None else feature.value(signals, result)
            out[feature.name] = out[feature.name] + value if feature.name in out else value
    out["coverage"] = result.evidence.get("coverage", 0.0)
    return out


@dataclass(frozen=True)
class AbstentionModel:
    """answer  <=>  intercept + sum_i coef_i * feature_i >= threshold (logistic regression
    P(in scope | features) on the logit scale; the threshold is fitted, see module docstring)."""

    features: tuple[str, ...]
    coef: tuple[float, ...]
    intercept: float
    threshold: float
    cv: dict                     # the operating point chosen on cross-validation
    # The thresholds of a query still being typed, one per typing class (search.typed.unfinished),
    # calibrated the same way on prefixes of the in-scope cases (search.fitting.fit_abstention);
    # None: `threshold`.
    typing_threshold: tuple[float, ...] | None = None

    def threshold_for(self, unfinished: int) -> float:
        """The threshold of a whole query (0), of a query of that typing class (1, 2, ...) or of a
        whole-reading text still being typed (search.typed.TYPED_WHOLE: the whole query's where
        the fit set none, as before the widget said it was typing)."""
        if not unfinished or not self.typing_threshold:
            return self.threshold
        if unfinished == TYPED_WHOLE:
            return self.typing_threshold[TYPED_WHOLE - 1] if len(self.typing_threshold) >= TYPED_WHOLE else self.threshold
        return self.typing_threshold[min(unfinished, len(self.typing_threshold)) - 1]

    def logit(self, features: dict[str, float]) -> float:
        return self.intercept + float(np.dot(self.coef, [features.get(name, 0.0) for name in self.features]))

    def answers(self, features: dict[str, float]) -> bool:
        return self.logit(features) >= self.threshold

    def as_dict(self) -> dict:
        row = {"features": list(self.features), "coef": list(self.coef), "intercept": self.intercept,
               "threshold": self.threshold, "cv": self.cv}
        if self.typing_threshold is not None:
            row["typing_threshold"] = list(self.typing_threshold)
        return row

    @classmethod
    def from_dict(cls, row: dict) -> "AbstentionModel":
        return cls(tuple(row["features"]), tuple(float(c) for c in row["coef"]), float(row["intercept"]),
                   float(row["threshold"]), dict(row.get("cv") or {}),
                   _thresholds(row.get("typing_threshold")))


def _thresholds(stored) -> tuple[float, ...] | None:
    """A stored typing threshold: one per class, or a single one (written before the classes)."""
    if stored is None:
        return None
    return tuple(float(t) for t in stored) if isinstance(stored, (list, tuple)) else (float(stored),)


@dataclass(frozen=True)
class Confidence:
    answer: bool
    logit: float | None          # the abstention model's score (None: no model, or pinned)
    top_probability: float


def assess(result: "PrefilterResult", model: AbstentionModel | None, unfinished: int = 0) -> Confidence:
    """Whether to answer at all (see the module docstring). `unfinished`: the query's abstention
    class (AnalysedQuery.judged_as: its typing class, TYPED_WHOLE, or 0 for a whole query): its
    threshold applies, and its prefix evidence (TYPING_EVIDENCE, present only for a typing class)
    counts as a word pointing at a task."""
    if not result.ranked:
        return Confidence(False, None, 0.0)
    top = result.ranked[0]
    if top.pinned:
        return Confidence(True, None, top.probability)
    if result.mode == "sparse" and not any(top.signals.get(name) for name in SPARSE_EVIDENCE + TYPING_EVIDENCE):
        return Confidence(False, None, top.probability)   # no word of the query points at any task
    if model is None:
        return Confidence(True, None, top.probability)
    logit = model.logit(answer_features(result))
    return Confidence(logit >= model.threshold_for(unfinished), round(logit, 4), top.probability)


def in_hidden_shadow(everyone: Sequence, caller_best: str | None, visible: Callable[[object], bool],
                     ratio: float) -> bool:
    """Whether the caller's answer stands in the shadow of a task they may not see (issue 43 item
    4): `everyone`, every role's ranking of the query (best first: .task, .probability; empty
    where that ranking is refused); `caller_best`, the id of the caller's own best
    task; `visible(task)`, whether the caller may see it. With p_E the probability in everyone's
    ranking,

        shadow  <=>  not visible(best_E)  and  p_E(caller's best) < r * p_E(best_E)

    (p_E = 0 where the caller's best is not in everyone's list). The abstention judges the caller's
    own ranking, over the tasks they may see: take the best task away and what is left can look
    confident ("backg" -> Hemoglobin / Hematocrit for a visitor, Background Checks being the HR's).
    In the shadow the answer is refused: the caller is told that some tasks are hidden and offered
    their own best tasks as "not sure" chips, a way forward that does not claim to be the answer
    ("cacfp claim" -> CACFP Eligibility). r: Settings.hidden_shadow_ratio (0: never)."""
    if ratio <= 0 or caller_best is None or not everyone or visible(everyone[0].task):
        return False
    mine = next((item.probability for item in everyone if item.task.id == caller_best), 0.0)
    return mine < ratio * everyone[0].probability


def skip_rerank(result: "PrefilterResult", min_probability: float) -> bool:
    """The LLM call can be skipped: the prefilter's top task already holds at least
    `min_probability` of the softmax mass (or there is nothing to re-order)."""
    if len(result.ranked) < 2:
        return True
    return result.ranked[0].probability >= min_probability


def shown(items: Sequence, tail_ratio: float) -> list:
    """The `items` (ranked results: .probability, .pinned; in any order, a re-ranked list too)
    that are shown: a pinned one always, any other whose probability (softmax of the fused scores
    over the visible tasks) is at least `tail_ratio` times the best one's,

        shown(t)  <=>  pinned(t)  or  p(t) >= r * max_t' p(t')

    a cut on the score tail instead of always k ("potty training log" need not list Governance
    Training Log fifth). r is fitted per catalog (search.fitting.choose_tail_ratio); 0 shows all."""
    top = max((item.probability for item in items), default=0.0)
    return [item for item in items if item.pinned or item.probability >= tail_ratio * top]

