"""A query still being typed: the CV-scored prefixes of the catalog's own cases (`typing_queries`,
cut by `typing_cuts`, each in its case's calibration fold) and the typing weights fitted on them
(`fit_typing`: the conditional logit of search.fitting.weights with TYPING_SIGNALS beside the
mode's own, its prior the whole-query weights). The abstention's typing thresholds are set on
the same prefixes (search.fitting.abstention). Why: the comment above KEYSTROKE_STRIDE; how serving
uses them: search.typed, docs/prefix-search.md.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from catalog.splits import bucket
from search.fitting.abstention import MIN_IN_SCOPE
from search.fitting.calibration import calibration_folds
from search.fitting.cv import CVPass, CVQuery, FitContext, cv_queries
from search.fitting.weights import fit_weights, typing_signals
from search.prefilter import TYPING_SIGNALS
from search.ranker import MODES, FusionWeights


# The widget asks after every keystroke, and says so (`typing=1`), so most queries the ranking
# meets are prefixes of what the person will have typed, at every length from the first letters
# to the last. The typing fit scores prefixes of the catalog's own cases in each case's CV fold, as
# the widget sends them (typing: every one gets a typing class, search.typed), and fits on them the
# weights such a query is ranked with (TYPING_SIGNALS among them: how much the dense signals should
# count on a fragment is the fit's to say) and the abstention's typing thresholds.
#
# Which prefixes: every keystroke length a person passes through, weighed as the widget meets
# them: a case of n characters is typed as n - 2 keystrokes from the third, so it gives one
# prefix per KEYSTROKE_STRIDE of them, one length drawn (a stable hash) from each stretch
# (`typing_cuts`). Before issue 43 the cuts were 3, 5 and 8 characters and half the last word:
# on CLINC150's long requests every keystroke between them (most of them) was calibrated on
# nothing, and a sentence cut mid-word was refused 34% of the time (docs/prefix-search.md).
KEYSTROKE_STRIDE = 3
FIRST_KEYSTROKE = 3      # the widget's measure and the fit's prefixes start at the third character
MAX_TYPING_CASES = 600   # in-scope cases whose prefixes are scored (a stable hash sample)


def typing_cuts(query: str, stride: int = KEYSTROKE_STRIDE, seed: int = 0) -> list[str]:
    """The prefixes of `query` a person has typed on the way to it, one per `stride` keystrokes:
    the keystroke lengths FIRST_KEYSTROKE .. len - 1 split into ceil(count / stride) equal
    stretches, one length drawn from each by a stable hash of the query (catalog.splits.bucket),
    so that every length is covered across a catalog's cases in proportion to how often the widget
    asks it. Each is at least two characters (spaces aside) and shorter than the query; a cut
    keeps a space typed after its last word (a finished word: AnalysedQuery.finished), as the
    widget sends it."""
    text = query.strip()
    lengths = range(FIRST_KEYSTROKE, len(text))
    cuts = []
    if lengths:
        stretches = -(-len(lengths) // stride)
        for s in range(stretches):
            lo, hi = s * len(lengths) // stretches, (s + 1) * len(lengths) // stretches
            cuts.append(text[:lengths[lo + int(bucket(seed + s, text) * (hi - lo))]])
    return list(dict.fromkeys(c for c in cuts if 2 <= len(c.strip()) and c.strip() != text))


def typing_queries(context: FitContext, max_cases: int = MAX_TYPING_CASES) -> list[CVQuery]:
    """The CV-scored prefixes (typing_cuts) of up to `max_cases` in-scope cases, each sent as the
    widget sends a keystroke (typing) and scored in its case's calibration fold (blocked where the
    suite was written in runs, calibration_folds), so that a prefix never has its own whole query
    in memory."""
    _, assignment = calibration_folds(context.cases, context.seed)
    return cv_queries(context.sample(max_cases), CVPass(assignment=assignment, variants=typing_cuts, typing=True,
                                                       keep=lambda analysed: analysed.judged_as))


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
