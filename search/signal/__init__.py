"""The ranking signals: one module each (search/signal/<name>.py), registered here, once.

`REGISTRY` lists them in the order the prefilter computes and shows them; everything that names
signals reads it: the prefilter's families (search.prefilter.SIGNALS, ...), its deferred signals
and abstention evidence (search.prefilter.DEFERRABLE, EVIDENCE), the abstention's sparse evidence
and its models' features (search.confidence.SPARSE_EVIDENCE, features_for_mode), the
evaluation's single-signal baselines (evaluation.configs), the pooled default derivation
(evaluation.defaults), the configuration reference (ops/gen_config_doc.py) and the "why"
line's phrases (`says`, sent with each result as `signal_phrases`). Registration is this explicit list: importing a signal's module registers
nothing. Adding a signal: docs/architecture.md, "Adding a signal".
"""
from __future__ import annotations

from search.signal import (begins, centroid, embedding, exemplar, learned, lexical, neighbour, prototype,
                           rationale, typed, typo)
from search.signal.base import FAMILIES, MODES, AbstentionFeature, Evidence, QueryContext, Signal

REGISTRY: tuple[Signal, ...] = (
    lexical.SIGNAL, rationale.SIGNAL, typo.SIGNAL, exemplar.SIGNAL,
    embedding.SIGNAL, centroid.SIGNAL, neighbour.SIGNAL, prototype.SIGNAL,
    typed.SIGNAL, begins.SIGNAL,
    learned.SIGNAL,
)
BY_NAME: dict[str, Signal] = {s.name: s for s in REGISTRY}


def named(family: str) -> tuple[str, ...]:
    """The names of the registered signals of `family` (FAMILIES), in registry order."""
    return tuple(s.name for s in REGISTRY if s.family == family)


def phrases() -> dict[str, str]:
    """signal name -> the "why" line's phrase, for the signals that have one."""
    return {s.name: s.says for s in REGISTRY if s.says}


__all__ = ["BY_NAME", "FAMILIES", "MODES", "REGISTRY", "AbstentionFeature", "Evidence", "QueryContext", "Signal",
           "named", "phrases"]
