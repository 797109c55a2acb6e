"""The evaluated configurations: simple baselines, the ablation ladder, the product, the LLM.

Every deterministic configuration replays the product's own ranking function
(search.prefilter.rank_values) over the test queries' signal values, with a weight policy:

    fixed     one fixed weight set (a single-signal baseline, or the shipped defaults)
    fitted    weights fitted on CV inside the training split over a subset of the signals
              (search.fitting.fit_weights), exactly as the product fits its own
    product   the product's whole fit (search.fitting.fit_ranker): weights per mode, shortlist
              depth, prototypes and abstention

`bm25` is the plain baseline a customer would otherwise pick (BM25 over name + help + the
training test-case queries appended to each task, via bm25s); `rerank` goes through the real
SearchService; `llm_direct` asks the LLM to pick from the whole catalog.

Pins (a training case with exactly the query's text puts its gold first) belong to the lexicon,
so only the configurations built on it use them.
"""
from __future__ import annotations

from dataclasses import dataclass

from search.prefilter import DENSE_SIGNALS
from search.signal import REGISTRY
from settings import Weights

#: bm25, then each signal's single-signal baseline (Signal.baseline, search/signal/)
SINGLE_SIGNALS = tuple(s for s in REGISTRY if s.baseline)
BASELINES = ("bm25", *(s.name for s in SINGLE_SIGNALS))
LADDER = ("hybrid_rationale", "exemplar", "prefilter_defaults", "prefilter", "prefilter_sparse")
LLM_CONFIGS = ("rerank", "llm_direct")
ALL_CONFIGS = BASELINES + LADDER + LLM_CONFIGS
BASELINE = "prefilter"


def _only(name: str) -> Weights:
    return Weights(**{field: (1.0 if field == name else 0.0) for field in Weights.__dataclass_fields__})


@dataclass(frozen=True)
class ConfigSpec:
    name: str
    kind: str                              # "fixed" | "fitted" | "product" | "bm25" | "rerank" | "llm_direct"
    description: str
    weights: Weights | None = None         # kind "fixed"
    signals: tuple[str, ...] = ()          # kind "fitted": the signals it may use
    pins: bool = False
    mode: str = "full"                     # "sparse": ranked as if the embeddings were down

    @property
    def needs_embedding(self) -> bool:
        if self.kind == "fixed":
            return any(getattr(self.weights, s) for s in DENSE_SIGNALS)
        if self.kind == "fitted":
            return any(s in DENSE_SIGNALS for s in self.signals)
        return False


def config_specs(defaults: Weights) -> dict[str, ConfigSpec]:
    specs = [
        ConfigSpec("bm25", "bm25", "plain BM25 (bm25s) over name + help + the training cases' queries per task"),
        *(ConfigSpec(s.name, "fixed", s.baseline, _only(s.name)) for s in SINGLE_SIGNALS),
        ConfigSpec("hybrid_rationale", "fitted", "the earlier design's signals (lexical, rationale lexicon, typo, "
                   "task embedding) with pins, weights fitted by CV", signals=("lexical", "rationale", "typo", "embedding"),
                   pins=True),
        ConfigSpec("exemplar", "fitted", "exemplar memory alone (case-query BM25, centroid, neighbour, prototype), "
                   "weights fitted by CV", signals=("exemplar", "centroid", "neighbour", "prototype")),
        ConfigSpec("prefilter_defaults", "fixed", "every signal with the shipped default weights, no fit, pins",
                   defaults, pins=True),
        ConfigSpec("prefilter", "product", "the product: every signal, per-catalog fit, pins, fitted abstention",
                   pins=True),
        ConfigSpec("prefilter_sparse", "product", "the product in its degraded mode (embeddings off): sparse "
                   "signals with their own fitted weights and abstention", pins=True, mode="sparse"),
        ConfigSpec("rerank", "rerank", "the full system: SearchService(rerank=True) over the fitted prefilter"),
        ConfigSpec("llm_direct", "llm_direct", "whole catalog (names) in one chat completion, top-5 names, "
                   "no shortlist/validation"),
    ]
    return {s.name: s for s in specs}


def resolve(names: tuple[str, ...] | list[str]) -> list[str]:
    """CLI names -> ordered unique config names; 'all' expands to every configuration,
    'deterministic' to all but the LLM ones."""
    wanted: list[str] = []
    for raw in names or ("all",):
        for name in str(raw).split(","):
            name = name.strip()
            if not name:
                continue
            if name == "all":
                wanted.extend(ALL_CONFIGS)
            elif name == "deterministic":
                wanted.extend(BASELINES + LADDER)
            elif name in ALL_CONFIGS:
                wanted.append(name)
            else:
                raise ValueError(f"unknown configuration {name!r}; choose from {', '.join(ALL_CONFIGS)}, "
                                 "deterministic or all")
    return [n for n in ALL_CONFIGS if n in wanted]
