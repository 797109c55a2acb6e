"""The evaluated configurations (the ablation ladder of paper Table 2, plus baselines).

Every deterministic configuration is the product's own prefilter (search.prefilter.prefilter)
with different fusion weights; the LLM configurations go through the real SearchService
(`rerank`) or a plain chat completion (`llm_direct`).

Pins (a training case whose query has exactly the query's terms puts its gold first) belong to
the rationale lexicon, so configurations without the rationale signal run without pins.
"""
from __future__ import annotations

from dataclasses import dataclass

from settings import Weights

PAPER_WEIGHTS = Weights(lexical=1.0, rationale=0.8, embedding=0.5, typo=0.3)
DETERMINISTIC = ("lexical", "embedding", "hybrid_no_rationale", "hybrid_rationale", "prefilter",
                 "prefilter_paper_weights")
LLM_CONFIGS = ("rerank", "llm_direct")
ALL_CONFIGS = DETERMINISTIC + LLM_CONFIGS
BASELINE = "prefilter"


@dataclass(frozen=True)
class ConfigSpec:
    name: str
    kind: str                      # "prefilter" | "rerank" | "llm_direct"
    weights: Weights | None
    pins: bool
    description: str

    @property
    def needs_embedding(self) -> bool:
        return self.kind != "llm_direct" and (self.weights is None or self.weights.embedding > 0)

    def weights_row(self) -> dict | None:
        if self.weights is None:
            return None
        w = self.weights
        return {"lexical": w.lexical, "rationale": w.rationale, "embedding": w.embedding, "typo": w.typo,
                "pins": self.pins}


def config_specs(product: Weights) -> dict[str, ConfigSpec]:
    a, b, g = product.lexical, product.rationale, product.embedding
    specs = [
        ConfigSpec("lexical", "prefilter", Weights(1.0, 0.0, 0.0, 0.0), False,
                   "BM25F over task name/aliases/category/help only (no typo correction)"),
        ConfigSpec("embedding", "prefilter", Weights(0.0, 0.0, 1.0, 0.0), False,
                   "dense cosine similarity only"),
        ConfigSpec("hybrid_no_rationale", "prefilter", Weights(a, 0.0, g, 0.0), False,
                   "lexical + embedding (b = 0, d = 0)"),
        ConfigSpec("hybrid_rationale", "prefilter", Weights(a, b, g, 0.0), True,
                   "lexical + rationale lexicon (with pins) + embedding (d = 0)"),
        ConfigSpec("prefilter", "prefilter", product, True,
                   "the product's first stage: all four signals with settings.weights"),
        ConfigSpec("prefilter_paper_weights", "prefilter", PAPER_WEIGHTS, True,
                   "the same prefilter with the paper's weights 1.0/0.8/0.5/0.3"),
        ConfigSpec("rerank", "rerank", product, True,
                   "the full system: SearchService(rerank=True), prefilter shortlist + LLM re-rank"),
        ConfigSpec("llm_direct", "llm_direct", None, False,
                   "whole catalog (names) in one chat completion, top-5 names, no shortlist/validation"),
    ]
    return {s.name: s for s in specs}


def resolve(names: tuple[str, ...] | list[str]) -> list[str]:
    """CLI names -> ordered unique config names; 'all' expands to every configuration."""
    wanted: list[str] = []
    for raw in names or ("all",):
        for name in str(raw).split(","):
            name = name.strip()
            if not name:
                continue
            if name == "all":
                wanted.extend(ALL_CONFIGS)
            elif name in ALL_CONFIGS:
                wanted.append(name)
            else:
                raise ValueError(f"unknown configuration {name!r}; choose from {', '.join(ALL_CONFIGS)} or all")
    ordered = [n for n in ALL_CONFIGS if n in wanted]
    return ordered
