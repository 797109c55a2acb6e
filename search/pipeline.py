"""The ranking pipeline: one implementation, called by everything that ranks.

    query --analyse--> AnalysedQuery --score--> Scored --fuse--> Ranked
                       (normalised,             (signal values    (the fused top k, the
                        typo-corrected,          over the tasks    abstention's decision,
                        prefix-expanded)         the viewer sees)  the tail cut)

`Pipeline(index, params)` binds the index and the fit (search.ranker.RankerParams: fusion
weights, typing weights, abstention models, tail cut) that rank together. Serving
(serving.service), the change and rollback previews (admin.preview), the evaluation replay
(evaluation.replay) and the prefix evaluation (evaluation.prefixes) all call it with the index
and fit they mean, so a preview or an evaluation ranks exactly as the service would with that
index and fit; none reaches into the stages (signal_values, fuse, rank_order, assess).

`serving_index` builds the index a fit serves from tasks and cases (the lexicon, the exemplar
memory, the learned exemplars the fit weighed, the written-cases counterfactual where the fit put
learned exemplars in the memory) and `attach` adds its vectors and the fit's prototypes: the
service, the previews and the evaluation build their indexes with them.

What stays outside: the embedder (I/O; the caller embeds `AnalysedQuery.embedding_text`), the
LLM re-ranking (rerank/), the response (serving.service), and the fitting's inner loops
(search.fitting re-fuses cached signal values thousands of times to choose the weights).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np

from catalog.records import CaseRecord, TaskRecord
from lexicon.rationale import build_lexicon
from search.confidence import Confidence, assess, shown
from search.fitting import attach_vectors
from search.index import Enrichment, SearchIndex, TaskText, build_index, with_use
from search.prefilter import (AnalysedQuery, PrefilterResult, Scored, ScoredTask, analyse_query, deferrable,
                              rank_scored, score_query)
from search.prototypes import INIT_SCALE
from search.ranker import RankerParams
from settings import Settings


@dataclass(frozen=True)
class Ranked:
    """One query's ranking as the product decides it."""

    analysed: AnalysedQuery
    result: PrefilterResult      # the fused top k, best first (pinned tasks first)
    confidence: Confidence       # whether to answer at all (search.confidence.assess)
    tail: float                  # the score-tail ratio of what is shown (search.confidence.shown)

    @property
    def answered(self) -> bool:
        return self.confidence.answer

    def shown(self, k: int) -> list[ScoredTask]:
        """What a user is shown of the top `k` without re-ranking: nothing when the pipeline
        refuses ("no confident match"), else the top k after the tail cut."""
        return shown(self.result.ranked[:k], self.tail) if self.answered else []


class Pipeline:
    """query -> analysed -> scored -> ranked, over one index and one fit (module docstring)."""

    def __init__(self, index: SearchIndex, params: RankerParams, typo_min_similarity: float = 80.0,
                 abstain: bool = True):
        self.index = index
        self.params = params
        self.typo_min_similarity = typo_min_similarity
        self.abstain = abstain

    @classmethod
    def for_settings(cls, index: SearchIndex, params: RankerParams, settings: Settings) -> "Pipeline":
        return cls(index, params, settings.typo_min_similarity, settings.abstain)

    def analyse(self, query: str, finished: bool | None = None, typing: bool | None = None) -> AnalysedQuery:
        """search.prefilter.analyse_query with this pipeline's typo tolerance."""
        return analyse_query(self.index, query, self.typo_min_similarity, finished=finished, typing=typing)

    def score(self, analysed: AnalysedQuery, query_vector: np.ndarray | None, roles=None, restrict: bool = True,
              pins: bool = True, defer: bool = False) -> Scored:
        """Every signal's value over the tasks the viewer (`roles`, `restrict`: SearchIndex.visible)
        may see, the pins of the exact query (`pins`) and the nearest out-of-scope case. `defer`:
        leave out the signals this fit weighs 0 (search.prefilter.DEFERRABLE; they are computed
        at the returned tasks only), for a query fused once with the fit's own weights."""
        skip = frozenset()
        if defer:
            skip = deferrable(self.params.weights_for(analysed.unfinished, analysed.foreign), "full")
        return score_query(self.index, analysed, query_vector, roles, restrict, pins, skip)

    def fuse(self, scored: Scored, k: int, weights=None, explain: bool = False) -> Ranked:
        """The top `k` of `scored` fused with the fit's weights for the query (its typing weights
        while it is being typed), or `weights` (an evaluation's configuration), then the fit's
        abstention and tail cut. `explain`: with the word-level matches and what use added."""
        analysed = scored.analysed
        if weights is None:
            weights = self.params.weights_for(analysed.unfinished, analysed.foreign)
        result = rank_scored(self.index, scored, weights, k, self.typo_min_similarity, explain)
        model = self.params.abstention_for(result.mode, analysed.foreign) if self.abstain else None
        return Ranked(analysed, result, assess(result, model, analysed.unfinished),
                      self.params.tail_for(result.mode, analysed.unfinished))

    def rank(self, analysed: AnalysedQuery, query_vector: np.ndarray | None, k: int, roles=None,
             restrict: bool = True, pins: bool = True, explain: bool = True) -> Ranked:
        """score, then fuse with the fit's weights: what the service answers."""
        return self.fuse(self.score(analysed, query_vector, roles, restrict, pins, defer=True), k, explain=explain)


# -- the index a fit serves ---------------------------------------------------------------------------
@dataclass(frozen=True)
class IndexOptions:
    """How serving_index builds: `enrichment` of the task text (kb.enrich), or the `task_text`
    already analysed with it (search.index.analyse_tasks); `held_out`: normalised queries whose
    learned exemplars stay out (a CV fold's); `written`: keep the written-cases-only index beside
    one that holds learned cases, for contributions.learned (a preview or an evaluation, which
    show no contributions, go without)."""

    enrichment: Enrichment | None = None
    task_text: TaskText | None = None
    held_out: frozenset[str] = frozenset()
    written: bool = True


def serving_index(settings: Settings, tasks: Sequence[TaskRecord], cases: Sequence[CaseRecord],
                  params: RankerParams, options: IndexOptions = IndexOptions()) -> SearchIndex:
    """The index (without vectors: `attach`) that `params` ranks the active `tasks` and `cases`
    with: their lexicon and exemplar memory; where the fit put the exemplars learned from use in
    the memory (`params.learned_as_cases`), those too (and, IndexOptions.written, the
    written-cases-only index beside it); and the learned memory where the fit weighs the
    `learned` signal."""
    enrichment, task_text = options.enrichment, options.task_text
    tasks = [t for t in tasks if t.active]

    def build(indexed: Sequence[CaseRecord]) -> SearchIndex:
        return build_index(tasks, build_lexicon(indexed), settings.field_weights, enrichment, cases=indexed,
                           task_text=task_text)

    return with_use(build, cases, params.learned if params.learned_as_cases else (),
                    params.learned if weighs_learned(params) else (), options.held_out, written=options.written)


def weighs_learned(params: RankerParams) -> bool:
    """Whether any of the fit's weight sets (whole queries, typed ones; either mode) weighs the
    `learned` signal: only then does the index carry the learned memory."""
    if not params.learned:
        return False
    sets = [params.weights] + ([params.typing] if params.typing is not None else [])
    return any(float(getattr(w.for_mode(mode), "learned", 0.0)) > 0 for w in sets for mode in ("full", "sparse"))


def attach(index: SearchIndex, params: RankerParams, embedder, task_vectors: np.ndarray | None = None,
           prototypes: str = "fitted") -> SearchIndex:
    """`index` with its vectors (embedder; EmbeddingUnavailable propagates) and prototypes:
    "fitted" (the fit's, as served), or "centroids" (each task's scaled exemplar centroid, the
    prototypes' starting point: a CV fold, where the fitted ones would leak its held-out cases)."""
    index = attach_vectors(index, embedder, task_vectors)
    if prototypes == "centroids":
        if params.prototypes is not None and index.exemplars.centroids is not None:
            return index.with_prototypes(INIT_SCALE * index.exemplars.centroids)
        return index
    index = index.with_prototypes(params.prototype_matrix(index))
    if index.written is not None:
        index = index.with_written(index.written.with_prototypes(params.prototype_matrix(index.written, "written")))
    if index.trusted is not None:
        index = index.with_trusted(index.trusted.with_prototypes(params.prototype_matrix(index.trusted, "trusted")))
    return index


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
