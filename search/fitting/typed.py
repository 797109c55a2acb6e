"""A query still being typed: the CV-scored prefixes of the catalog's own cases (`typing_queries`,
cut by `typing_cuts`, each in its case's calibration fold) and the typing weights fitted on them
(`fit_typing`: the conditional logit of search.fitting.weights with TYPING_SIGNALS beside the
mode's own, its prior the whole-query weights). The abstention's typing thresholds are set on
the same prefixes (search.fitting.abstention). Why: the comment above TYPING_CUTS; how serving
uses them: search.typed, docs/prefix-search.md.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from search.fitting.abstention import MIN_IN_SCOPE
from search.fitting.calibration import calibration_folds
from search.fitting.cv import CVPass, CVQuery, FitContext, cv_queries
from search.fitting.weights import fit_weights, typing_signals
from search.prefilter import TYPING_SIGNALS
from search.ranker import MODES, FusionWeights


# The widget asks after every keystroke, so most queries the ranking meets are prefixes of what
# the person will have typed. The typing fit scores prefixes of the catalog's own cases (cut
# where people are seen mid-word: after 3, 5 and 8 characters, and halfway through the last
# word) in each case's CV fold, keeps those the prefilter reads as unfinished (search.typed), and
# fits the weights such a query is ranked with (TYPING_SIGNALS among them: how much the dense signals
# should count on a fragment is the fit's to say) and the abstention's typing threshold.
TYPING_CUTS = (3, 5, 8)
MAX_TYPING_CASES = 600   # in-scope cases whose prefixes are scored (a stable hash sample)


def typing_cuts(query: str) -> list[str]:
    """The prefixes of `query` a person has typed on the way to it: the first 3, 5 and 8
    characters and the query cut halfway through its last word, at least two characters and
    shorter than the query, once each. A cut keeps the space typed after its last word (a
    finished word: AnalysedQuery.finished), as the widget sends it."""
    text = query.strip()
    last = text.split()[-1] if text.split() else ""
    cuts = [text[:n] for n in TYPING_CUTS] + ([text[:len(text) - (len(last) + 1) // 2]] if len(last) > 1 else [])
    return list(dict.fromkeys(c for c in cuts if 2 <= len(c.strip()) and c.strip() != text))


def typing_queries(context: FitContext, max_cases: int = MAX_TYPING_CASES) -> list[CVQuery]:
    """The CV-scored prefixes (typing_cuts) of up to `max_cases` in-scope cases, each in its
    case's calibration fold (blocked where the suite was written in runs, calibration_folds), so
    that a prefix never has its own whole query in memory."""
    _, assignment = calibration_folds(context.cases, context.seed)
    return cv_queries(context.sample(max_cases), CVPass(assignment=assignment, variants=typing_cuts,
                                                       keep=lambda analysed: analysed.unfinished))


def fit_typing(queries: Sequence[CVQuery], weights: FusionWeights, defaults: FusionWeights, modes: Sequence[str],
               signals: dict[str, Sequence[str] | None]) -> FusionWeights | None:
    """The typing weights of each mode, fitted on the typed prefixes `queries`, starting from the
    whole-query `weights` with the defaults' TYPING_SIGNALS weights; None without enough prefixes."""
    if sum(1 for q in queries if q.case.gold) < MIN_IN_SCOPE:
        return None
    fitted = {}
    for mode in MODES:
        prior = replace(weights.for_mode(mode), **{name: getattr(defaults.for_mode(mode), name) for name in TYPING_SIGNALS})
        fitted[mode] = (fit_weights(queries, mode, prior, signals=typing_signals(signals.get(mode)), extra=TYPING_SIGNALS)
                        if mode in modes else prior)
    return FusionWeights(fitted["full"], fitted["sparse"])
