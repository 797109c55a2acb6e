"""The ranker's parameters: fusion weights per mode, shortlist depth and the abstention model.

One `RankerParams` is what every serving process ranks with. It comes either from the shipped
defaults (settings.Weights / DegradedWeights, no abstention) or from a per-catalog fit
(search.fitting) stored in the database, and it serialises to the JSON kept there.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

import numpy as np

from search import prototypes
from search.confidence import AbstentionModel
from search.index import SearchIndex
from search.learned import LearnedExemplar
from settings import Settings, Weights

MODES = ("full", "sparse")


def weights_from_dict(row: dict) -> Weights:
    known = {f.name for f in fields(Weights)}
    return Weights(**{name: float(row.get(name, 0.0)) for name in known})


@dataclass(frozen=True)
class FusionWeights:
    """One weight set per mode: "full" (all signals) and "sparse" (embeddings unavailable)."""

    full: Weights
    sparse: Weights

    def for_mode(self, mode: str) -> Weights:
        return self.full if mode == "full" else self.sparse

    def as_dict(self) -> dict:
        return {"full": asdict(self.full), "sparse": asdict(self.sparse)}

    @classmethod
    def from_dict(cls, row: dict) -> "FusionWeights":
        return cls(weights_from_dict(row["full"]), weights_from_dict(row["sparse"]))


@dataclass(frozen=True)
class RankerParams:
    weights: FusionWeights
    shortlist_size: int
    abstention: dict[str, AbstentionModel | None] = field(default_factory=dict)
    source: str = "default"          # "default" | "fit"
    fit_id: int | None = None
    prototypes: dict | None = None   # {"task_ids": [...], "matrix": float16 base64} (search.prototypes)
    learned: tuple[LearnedExemplar, ...] = ()   # exemplars learned from use the fit weighed (search.learned)
    learned_as_cases: bool = False              # they also join the exemplar memory (search.learned.learned_cases)
    # Weights of a query still being typed (search.typed), fitted on prefixes of the cases
    # (search.fitting.fit_typing); None: the whole-query weights, with their `typed` weight.
    typing: FusionWeights | None = None
    # The score-tail cut of what is shown (search.confidence.shown), per mode: (whole
    # queries, queries still being typed), fitted by search.fitting.choose_tail_ratio; none (or a
    # mode not fitted): always k results.
    tail: dict[str, tuple[float, float]] = field(default_factory=dict)
    # Weights and abstention of a query written in another language than the catalog's
    # (lexicon.language; AnalysedQuery.foreign), fitted on the CV queries with the evidence such a
    # query cannot have masked, and on the catalog's own cases in other languages
    # (search.fitting.foreign); None / {}: the weights above (whose lexical, typo and typed
    # signals then say 0 for it) and the abstention above.
    foreign: FusionWeights | None = None
    foreign_abstention: dict[str, AbstentionModel | None] = field(default_factory=dict)

    def tail_for(self, mode: str, unfinished: int) -> float:
        return self.tail.get(mode, (0.0, 0.0))[1 if unfinished else 0]

    def weights_for(self, unfinished: int, foreign: bool = False) -> FusionWeights:
        """The fusion weights a query is ranked with: the foreign weights for a query in another
        language than the catalog's (where fitted), the typing weights while it is being typed."""
        if foreign and self.foreign is not None:
            return self.foreign
        return self.typing if unfinished and self.typing is not None else self.weights

    def prototype_matrix(self, index: SearchIndex, which: str = "served") -> np.ndarray | None:
        """The fitted prototypes in `index`'s task order; a task the fit did not know (added
        since) gets its scaled centroid, the prototypes' starting point. `written`: the ones
        fitted on the written cases alone (stored as "written_matrix" when the fit put learned
        exemplars in the memory: the counterfactual of contributions.learned, search.index), or
        (`which` "trusted") those fitted without the learned cases anonymous networks alone stand
        behind ("trusted_matrix"; the written ones where none is stored: no verified case)."""
        if not self.prototypes or index.exemplars.centroids is None:
            return None
        known = self.prototypes["task_ids"]
        key = {"written": ("written_matrix",), "trusted": ("trusted_matrix", "written_matrix")}.get(which, ())
        key = next((k for k in key if k in self.prototypes), "matrix")
        fitted = prototypes.decode(self.prototypes[key], len(known))
        row_of = {task_id: i for i, task_id in enumerate(known)}
        out = prototypes.INIT_SCALE * index.exemplars.centroids.copy()
        for row, task in enumerate(index.tasks):
            if task.id in row_of and fitted.shape[1] == out.shape[1]:
                out[row] = fitted[row_of[task.id]]
        return out

    def abstention_for(self, mode: str, foreign: bool = False) -> AbstentionModel | None:
        """The abstention model of `mode`; for a query in another language than the catalog's,
        the one fitted for such queries where there is one."""
        if foreign and self.foreign_abstention.get(mode) is not None:
            return self.foreign_abstention[mode]
        return self.abstention.get(mode)

    def as_dict(self) -> dict:
        row = {"weights": self.weights.as_dict(), "shortlist_size": self.shortlist_size,
               "abstention": {mode: (model.as_dict() if model else None) for mode, model in self.abstention.items()},
               "prototypes": self.prototypes}
        if self.learned:
            row["learned"] = [[e.query, e.task_id, e.relevance, e.sessions, e.verified] for e in self.learned]
        if self.learned_as_cases:
            row["learned_as_cases"] = True
        if self.typing is not None:
            row["typing"] = self.typing.as_dict()
        if self.tail:
            row["tail"] = {mode: list(ratios) for mode, ratios in self.tail.items()}
        if self.foreign is not None:
            row["foreign"] = self.foreign.as_dict()
            row["foreign_abstention"] = {mode: (model.as_dict() if model else None)
                                         for mode, model in self.foreign_abstention.items()}
        return row

    @classmethod
    def from_dict(cls, row: dict, source: str = "fit", fit_id: int | None = None) -> "RankerParams":
        abstention = {mode: (AbstentionModel.from_dict(model) if model else None)
                      for mode, model in (row.get("abstention") or {}).items()}
        # a fit stored before issue 42 did not say who stood behind a pair: read as anonymous
        learned = tuple(LearnedExemplar(str(q), str(t), float(r), int(s), bool(rest[0]) if rest else False)
                        for q, t, r, s, *rest in row.get("learned") or ())
        typing = FusionWeights.from_dict(row["typing"]) if row.get("typing") else None
        tail = {str(mode): (float(whole), float(typed)) for mode, (whole, typed) in (row.get("tail") or {}).items()}
        foreign = FusionWeights.from_dict(row["foreign"]) if row.get("foreign") else None
        foreign_abstention = {mode: (AbstentionModel.from_dict(model) if model else None)
                              for mode, model in (row.get("foreign_abstention") or {}).items()}
        return cls(FusionWeights.from_dict(row["weights"]), int(row["shortlist_size"]), abstention, source, fit_id,
                   row.get("prototypes"), learned, bool(row.get("learned_as_cases")), typing, tail, foreign,
                   foreign_abstention)

    def summary(self) -> dict:
        """What a response or /readyz says about the ranker in use."""
        return {"source": self.source, "fit_id": self.fit_id, "shortlist_size": self.shortlist_size,
                "prototypes": self.prototypes is not None,
                "abstention": {mode: model is not None for mode, model in self.abstention.items()}}


def default_params(settings: Settings) -> RankerParams:
    """The shipped defaults: settings' weights for both modes, no abstention (it needs
    out-of-scope cases of the catalog's own to be fitted honestly)."""
    return RankerParams(FusionWeights(settings.weights, settings.degraded_weights), settings.shortlist_size,
                        {mode: None for mode in MODES}, "default", None)
