"""Per-catalog fitting: fusion weights, shortlist depth and abstention, by cross-validation on
the catalog's own test cases.

1. **CV signals** (`cv_queries`, search/fitting/cv.py): the cases are split into folds (a hash of
   each query, so the split is stable as the suite grows); each fold's cases are scored by an
   index whose lexicon and exemplar memory are built from the OTHER folds only, exactly as an
   unseen query would be. `FitContext` holds what a fit is made on, `CVPass` what one pass scores.
2. **Fusion weights** (`fit_weights`, weights.py): a conditional-logit model (McFadden 1974;
   listwise softmax learning to rank, Cao et al. 2007),

       p(t | q) = exp(w . x(q, t)) / sum_u exp(w . x(q, u)),   maximise sum_q log p(gold | q)

   over standardised signals, with an L2 penalty that pulls w towards the shipped defaults
   (a Gaussian prior centred on them): a catalog with few cases stays close to the defaults,
   one with many moves as far as its evidence says. Fitted separately for the full mode and
   the degraded mode without embeddings. A linear model keeps every result explainable: the
   response's per-signal contributions are its terms. Which signals each mode keeps is decided
   on cross-fitted CV (metrics.py: the degraded mode never below plain BM25; learned.py: the
   `learned` signal and the learned exemplars as cases).
3. **Shortlist depth** (metrics.py): the smallest K whose CV recall (Hit@K) is within one point
   of Hit@50; the score-tail cut of what is shown (tail.py).
4. **Abstention** (`fit_abstentions`, `fit_abstention`, abstention.py): logistic regression of
   "in scope" on the top answer's absolute evidence (search.confidence) against whatever
   negatives exist, and a split-conformal threshold on the in-scope cases' out-of-fold scores
   (`conformal_threshold`, at most ABSTAIN_BUDGET of answerable queries refused). Where the suite
   was written in runs of paraphrases (`written_together_range` > 1), it is fitted and
   calibrated on the cases scored again with each run in one fold (`calibration_queries`,
   calibration.py), as a new author's query would be.
5. **A query still being typed** (`fit_typing`, typed.py): the weights and the abstention's
   thresholds for prefixes of the cases.

`fit_ranker` (ranker.py) runs them all. The result is a `RankerParams` plus a report of the CV
figures that chose it; the store keeps both (ranker_fits) and every serving process ranks with
the newest. Every name is importable from `search.fitting` itself, as before the split.
"""
from __future__ import annotations

from search.fitting.abstention import (DEFAULT_BUDGET, L2_GRID, MIN_IN_SCOPE, MIN_NEGATIVES, _cross_fitted,
                                       _logistic, abstention_negatives, class_balance, conformal_threshold,
                                       fit_abstention, fit_abstentions, negative_evidence, operating_point)
from search.fitting.calibration import (DEPENDENCE_Z, MAX_CALIBRATION_QUERIES, MAX_DEPENDENCE_LAG, MAX_TASK_CASES,
                                        _jaccard_matrix, _task_runs, calibration_blocks, calibration_folds,
                                        calibration_queries, written_together_folds, written_together_range)
from search.fitting.cv import FOLDS, MAX_CV_QUERIES, CVPass, CVQuery, FitContext, cases_digest, cv_queries
from search.fitting.learned import (LEARNED_SIGNAL_NET_WINS, PAIRED_Z, choose_learned_as_cases, choose_learned_signal,
                                    first_written_answers, informative_learned, paired_first_hits, usable_learned)
from search.fitting.metrics import (BASELINE_SIGNALS, K_VALUES, choose_shortlist, choose_sparse_signals,
                                    cross_fitted_gold_ranks, cross_fitted_rank_metrics, cross_fitted_rankings,
                                    net_first_wins, rank_summary, ranked_ids, ranking_metrics, rankings)
from search.fitting.ranker import NO_USE, FitOptions, fit_ranker
from search.fitting.tail import TAIL_GRID, TAIL_MAX_LOSS, choose_tail_ratio, shown_metrics
from search.fitting.typed import KEYSTROKE_STRIDE, MAX_TYPING_CASES, fit_typing, typing_cuts, typing_queries
from search.fitting.weights import (CANDIDATES, PRIOR_STRENGTH, conditional_logit, design_matrices, fit_standardised,
                                    fit_weights, typing_signals)

__all__ = [
    "BASELINE_SIGNALS", "CANDIDATES", "CVPass", "CVQuery", "DEFAULT_BUDGET", "DEPENDENCE_Z", "FOLDS", "FitContext",
    "FitOptions", "K_VALUES", "L2_GRID", "LEARNED_SIGNAL_NET_WINS", "MAX_CALIBRATION_QUERIES", "MAX_CV_QUERIES",
    "MAX_DEPENDENCE_LAG", "MAX_TASK_CASES", "MAX_TYPING_CASES", "MIN_IN_SCOPE", "MIN_NEGATIVES", "NO_USE", "PAIRED_Z",
    "PRIOR_STRENGTH", "TAIL_GRID", "TAIL_MAX_LOSS", "KEYSTROKE_STRIDE", "_cross_fitted", "_jaccard_matrix", "_logistic",
    "_task_runs", "abstention_negatives", "calibration_blocks", "calibration_folds",
    "calibration_queries", "cases_digest", "choose_learned_as_cases", "choose_learned_signal", "choose_shortlist",
    "choose_sparse_signals", "choose_tail_ratio", "class_balance", "conditional_logit", "conformal_threshold",
    "cross_fitted_gold_ranks", "cross_fitted_rank_metrics", "cross_fitted_rankings", "cv_queries", "design_matrices",
    "first_written_answers", "fit_abstention", "fit_abstentions", "fit_ranker", "fit_standardised", "fit_typing",
    "fit_weights", "informative_learned", "negative_evidence", "net_first_wins", "operating_point",
    "paired_first_hits", "rank_summary", "ranked_ids", "ranking_metrics", "rankings", "shown_metrics",
    "typing_cuts", "typing_queries", "typing_signals", "usable_learned", "written_together_folds",
    "written_together_range",
]
