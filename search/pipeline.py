"""The ranking pipeline: one implementation, called by everything that ranks.

    SearchRequest --analyse--> AnalysedQuery --embed--> vector --score--> Scored --fuse--> Ranked
    (search.request:           (search.query:            (the         (signal values    (the fused top k,
     text, viewer,              normalised, typo-         embedder,    over the tasks    the abstention's
     typing meaning,            corrected, prefix-        passed in)   the viewer may    decision, the
     k, pins, explain)          expanded, typing class)                see; the pins)    tail cut)

`make_pipeline(index, params, settings, embedder)` is the one way a Pipeline is made: it binds an
index (search.assembly builds every index), the fit that ranks with it (search.ranker.
RankerParams: fusion weights, typing weights, abstention models, tail cut), the settings' typo
tolerance and abstention switch, and the embedder (I/O behind search.embeddings.Embedder; None:
the sparse signals only). Every caller ranks through it:

- serving (serving.service): the live index and fit, one request per search;
- the change and rollback previews (evaluation.impact, rendered by admin.preview): the index
  and fit each side of a change will serve, and the preview's cross-validation folds;
- the evaluation replay and the prefix evaluation (evaluation.replay, evaluation.prefixes),
  the error analysis (evaluation.errors): the index and fit made on the training split;
- the fitter's cross-validation (search.fitting.cv_queries): each fold's index, scoring every
  signal (no deferral, no pins), which reads no fit but the defaults the fit starts from.

What a text means is decided once, by the request (search.request): a test case is submitted
(`SearchRequest.of_case`) in all four, a prefix typed (`SearchRequest.typed`), so the same text
gets the same AnalysedQuery in serving, the preview, the fit's CV and the evaluation (issue 45;
tests/test_one_meaning.py).

None of them reaches into the stages (search.query.analyse_query, search.prefilter.score_query,
rank_scored, search.confidence.assess). What stays outside: the LLM re-ranking (rerank/), the
response (serving.service), and the fitting's inner loops (search.fitting re-fuses the cached
signal values of its CV queries thousands of times with search.prefilter.rank_values to choose
the weights; the evaluation's configurations re-fuse a query's Scored values through `fuse`).
`params_for` picks the stored fit that ranks a catalog's data.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np

from search.confidence import Confidence, assess
from search.prefilter import PrefilterResult, Scored, ScoredTask, deferrable, rank_ids, rank_scored, score_query
from search.query import AnalysedQuery, analyse_query
from search.index import SearchIndex
from search.ranker import RankerParams
from search.request import SearchRequest
from search import sequence
from settings import Settings


@dataclass(frozen=True)
class Ranked:
    """One query's ranking as the product decides it."""

    analysed: AnalysedQuery
    result: PrefilterResult      # the fused top k, best first (pinned tasks first)
    confidence: Confidence       # whether to answer at all (search.confidence.assess)
    tail: float                  # the score-tail ratio of what is shown (search.confidence.shown)
    on_screen: tuple[str, ...] = ()   # the request's held task ids (search.sequence)
    quiet: bool = False               # the typing since the screen adds no word that can speak
    same_word: bool = False           # all typed since the screen is the word still being typed

    @property
    def answered(self) -> bool:
        """Whether the abstention answers: a confident match (search.confidence.assess)."""
        return self.confidence.answer

    def refused(self) -> "Ranked":
        """This ranking with the abstention's answer turned to a refusal (the service's rule for an
        answer in a hidden task's shadow: search.confidence.in_hidden_shadow); the screen's rules
        apply as to any refusal."""
        return replace(self, confidence=replace(self.confidence, answer=False))

    def answers(self, k: int) -> bool:
        """Whether the top `k` show a task: a confident answer, or a task on screen that the
        new text has not spoken against (search.sequence)."""
        return self.answered or bool(self.on_screen and self.shown(k))

    def shown(self, k: int) -> list[ScoredTask]:
        """What a user is shown of the top `k` without re-ranking: the top k after the tail cut
        and the tasks on screen the sequence holds; only the held ones where the abstention refuses
        ("no confident match" when there are none: search.sequence.displayed)."""
        return self.displayed(self.result.ranked, k)

    def displayed(self, items: Sequence[ScoredTask], k: int) -> list[ScoredTask]:
        """What a list of `k` shows of `items` (this ranking, or its re-ranked order): the tail
        cut's and the held ones, or the held ones alone where the abstention refuses
        (search.sequence.displayed)."""
        # a word still being typed that the catalog cannot read speaks against no task on screen:
        # held wherever it now ranks (search.sequence, "A word the catalog cannot read")
        unread = self.same_word and self.analysed.typing_unknown
        return sequence.displayed(items, k, self.tail, self.on_screen, self.confidence.answer, self.quiet,
                                  self.same_word, slack=len(items) if unread else sequence.HOLD_SLACK)


class Pipeline:
    """request -> analysed -> embedded -> scored -> ranked, over one index and one fit (module
    docstring). Made by `make_pipeline`."""

    def __init__(self, index: SearchIndex, params: RankerParams, embedder, typo_min_similarity: float,
                 abstain: bool):
        self.index = index
        self.params = params
        self.embedder = embedder
        self.typo_min_similarity = typo_min_similarity
        self.abstain = abstain

    def analyse(self, request: SearchRequest) -> AnalysedQuery:
        """The request's text as every signal reads it, with its typing meaning
        (search.query.analyse_query, with this pipeline's typo tolerance)."""
        meaning = request.meaning
        return analyse_query(self.index, request.query, self.typo_min_similarity, finished=meaning.finished,
                             typing=meaning.typing, page_language=meaning.language)

    def embed(self, analysed: Sequence[AnalysedQuery]) -> list[np.ndarray | None]:
        """Each analysed query's vector (its `embedding_text`, embedded as a query, in one call),
        or None each where the pipeline has no embedder or its index no vectors (the sparse
        mode). EmbeddingUnavailable propagates: the caller degrades or fails as it must."""
        if self.embedder is None or not self.index.has_vectors or not analysed:
            return [None] * len(analysed)
        return list(self.embedder.embed([a.embedding_text for a in analysed], "query"))

    def score(self, request: SearchRequest, analysed: AnalysedQuery, query_vector: np.ndarray | None,
              defer: bool = False) -> Scored:
        """Every signal's value over the tasks the request's viewer may see
        (SearchIndex.visible), the pins of the exact query (`request.pins`) and the nearest
        out-of-scope case. `defer`: leave out the signals this fit weighs 0
        (search.prefilter.DEFERRABLE; they are computed at the returned tasks only), for a query
        fused once with the fit's own weights."""
        skip = frozenset()
        if defer:
            skip = deferrable(self.params.weights_for(analysed.unfinished, analysed.foreign), "full")
        roles, restrict = request.viewer.visible()
        return score_query(self.index, analysed, query_vector, roles, restrict, request.pins, skip)

    def fuse(self, scored: Scored, k: int, weights=None, explain: bool = False,
             screen: SearchRequest | None = None) -> Ranked:
        """The top `k` of `scored` fused with the fit's weights for the query (its typing weights
        while it is being typed), or `weights` (an evaluation's configuration), then the fit's
        abstention and tail cut. `explain`: with the word-level matches and what use added.
        `screen`: the request that says what is on screen (SearchRequest.typed: its `held` task ids,
        ranked wherever they fall after the top k, `quiet` and `same_word`; search.sequence)."""
        analysed = scored.analysed
        held, quiet, same_word = (screen.held, screen.quiet, screen.same_word) if screen is not None else ((), False, False)
        if weights is None:
            weights = self.params.weights_for(analysed.unfinished, analysed.foreign)
        result = rank_scored(self.index, scored, weights, k, explain=explain, also=held)
        model = self.params.abstention_for(result.mode, analysed.foreign) if self.abstain else None
        return Ranked(analysed, result, assess(result, model, analysed.judged_as),
                      self.params.tail_for(result.mode, analysed.unfinished), held, quiet, same_word)

    def ranked_ids(self, request: SearchRequest, analysed: AnalysedQuery, query_vector: np.ndarray | None,
                   k: int) -> list[str]:
        """The ids of the top `k` that `rank` returns for `request` with nothing held on screen
        (before abstention and the tail cut, which hide results but move none), best first,
        without building each position's result (search.prefilter.rank_ids: the same scores,
        fusion and order): what a cross-validated rank reads (evaluation.impact, the preview's
        cross-validation)."""
        scored = self.score(request, analysed, query_vector, defer=True)
        if scored.rows.size == 0:
            return []
        weights = self.params.weights_for(analysed.unfinished, analysed.foreign)
        return rank_ids(scored.tasks, scored.values, weights, k, scored.pinned)

    def rank(self, request: SearchRequest, analysed: AnalysedQuery | None = None,
             query_vector: np.ndarray | None = None, k: int | None = None) -> Ranked:
        """What the service answers: score (deferring what the fit weighs 0), then fuse with the
        fit's weights, the top `k` (default `request.k`). Analysed and embedded here unless the
        caller did it already (`analysed` and its `query_vector`, None in the sparse mode)."""
        if analysed is None:
            analysed = self.analyse(request)
            query_vector = self.embed([analysed])[0]
        scored = self.score(request, analysed, query_vector, defer=True)
        return self.fuse(scored, request.k if k is None else k, explain=request.explain, screen=request)


def make_pipeline(index: SearchIndex, params: RankerParams, settings: Settings, embedder=None,
                  abstain: bool | None = None) -> Pipeline:
    """The pipeline that ranks with `index` and the fit `params`: the settings' typo tolerance,
    and their abstention switch unless `abstain` says (an evaluation always abstains, to measure
    the fit's abstention whatever the server does); `embedder` embeds the queries (None: the
    sparse signals only)."""
    return Pipeline(index, params, embedder, settings.typo_min_similarity,
                    settings.abstain if abstain is None else abstain)


def params_for(fits, digest: str, defaults: RankerParams, enabled: bool = True,
               blocked: Callable[[], frozenset] | None = None) -> tuple[RankerParams, bool]:
    """The fit that ranks the data of `digest` (search.fitting.cases_digest): the newest stored
    fit made on exactly this data (so that a rollback ranks again with the fit it had), else the
    newest fit, else `defaults`; minus the learned pairs blocked since (`blocked()`); and
    whether a (re)fit is due. `fits`: the store (fit_for_digest, latest_fit)."""
    if not enabled:
        return defaults, False
    fit = fits.fit_for_digest(digest)
    stale = fit is None
    if fit is None:
        fit = fits.latest_fit()
    if fit is None:
        return defaults, True
    params = RankerParams.from_dict(fit.params, "fit", fit.id)
    if params.learned and blocked is not None:
        pairs = blocked()
        kept = tuple(e for e in params.learned if (e.query, e.task_id) not in pairs)
        if len(kept) != len(params.learned):
            return replace(params, learned=kept), True
    return params, stale
