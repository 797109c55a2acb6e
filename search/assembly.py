"""The one recipe of an index: tasks, test cases and a fit in, the SearchIndex that ranks them out.

Everything that ranks builds its index here, so that a preview, an evaluation or a fold of the
fit's cross-validation ranks with the index the service would build from the same data:

    build(settings, tasks, cases, use, options)    the index without vectors: the active tasks'
                                                    text, the lexicon and exemplar memory of the
                                                    cases, what use taught (`Use`,
                                                    search.index.with_use)
    serving_index(settings, tasks, cases, params)   `build` with what the fit `params` weighs of
                                                    use (`use_of`): the index a fit serves
    attach(index, params, embedder, prototypes=)    its vectors (`attach_vectors`) and prototypes:
                                                    "fitted" (the fit's, as served), "centroids"
                                                    (the scaled exemplar centroids: the preview's
                                                    cross-validation) or "own" (a softmax
                                                    regression on the index's own exemplars:
                                                    `prototypes_of`, the fit's folds)
    fold_index(...)                                 one fold of the fit's cross-validation: its
                                                    training cases and the learned exemplars of
                                                    the queries it does not hold out, vectors and
                                                    its own prototypes

Who calls what: the service (serving.service) `serving_index` then `attach` (the vectors may
fail: it serves without them); the change preview (evaluation.impact) and the evaluation replay
(evaluation.replay) `serving_index` and `attach`; the fitter (search.fitting) `fold_index`, and
`build`, `attach_vectors` and `prototypes_of` for the prototypes it stores. The pipeline
(search.pipeline) ranks an index made here; it builds none.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from catalog.records import CaseRecord, TaskRecord
from lexicon.rationale import build_lexicon
from search.index import Enrichment, SearchIndex, TaskText, build_index, embedding_text, symmetric_text, with_use
from search.learned import LearnedExemplar, unrelated_cosine
from search.prototypes import INIT_SCALE, fit_prototypes
from search.ranker import RankerParams
from settings import Settings


@dataclass(frozen=True)
class Use:
    """What use taught that an index holds (search.index.with_use): `as_cases`, learned
    exemplars that join the cases (exemplar memory and lexicon); `in_memory`, those of the
    `learned` signal's memory."""

    as_cases: Sequence[LearnedExemplar] = ()
    in_memory: Sequence[LearnedExemplar] = ()


@dataclass(frozen=True)
class IndexOptions:
    """How `build` builds: `enrichment` of the task text (kb.enrich), or the `task_text` already
    analysed with it (search.index.analyse_tasks); `held_out`: normalised queries whose learned
    exemplars stay out (a CV fold's), `cases_held_out` those left out of the cases (default:
    `held_out`; a fold of the fit leaves out near copies of its queries too); `written`: keep
    the written-cases-only index beside one that holds learned cases, for
    contributions.learned (a preview or an evaluation, which show no contributions, go
    without)."""

    enrichment: Enrichment | None = None
    task_text: TaskText | None = None
    held_out: frozenset[str] = frozenset()
    written: bool = True
    cases_held_out: frozenset[str] | None = None


def build(settings: Settings, tasks: Sequence[TaskRecord], cases: Sequence[CaseRecord], use: Use = Use(),
          options: IndexOptions = IndexOptions()) -> SearchIndex:
    """The index (without vectors: `attach`) of the active `tasks` and `cases`: their lexicon
    and exemplar memory, and what `use` taught (IndexOptions says what stays out)."""
    enrichment, task_text = options.enrichment, options.task_text
    tasks = [t for t in tasks if t.active]

    def build_from(indexed: Sequence[CaseRecord]) -> SearchIndex:
        return build_index(tasks, build_lexicon(indexed), settings.field_weights, enrichment, cases=indexed,
                           task_text=task_text)

    return with_use(build_from, cases, use.as_cases, use.in_memory, options.held_out, options.cases_held_out,
                    written=options.written)


def use_of(params: RankerParams) -> Use:
    """What of use the fit `params` ranks with: the exemplars learned from use in the memory
    where it put them there (`params.learned_as_cases`), and the learned memory where it weighs
    the `learned` signal."""
    return Use(params.learned if params.learned_as_cases else (), params.learned if weighs_learned(params) else ())


def serving_index(settings: Settings, tasks: Sequence[TaskRecord], cases: Sequence[CaseRecord],
                  params: RankerParams, options: IndexOptions = IndexOptions()) -> SearchIndex:
    """The index (without vectors: `attach`) that `params` ranks the active `tasks` and `cases`
    with: `build` with what the fit weighs of use (`use_of`; and, IndexOptions.written, the
    written-cases-only index beside one that holds learned cases)."""
    return build(settings, tasks, cases, use_of(params), options)


def weighs_learned(params: RankerParams) -> bool:
    """Whether any of the fit's weight sets (whole queries, typed ones; either mode) weighs the
    `learned` signal: only then does the index carry the learned memory."""
    if not params.learned:
        return False
    sets = [params.weights] + ([params.typing] if params.typing is not None else [])
    return any(float(getattr(w.for_mode(mode), "learned", 0.0)) > 0 for w in sets for mode in ("full", "sparse"))


def attach_vectors(index: SearchIndex, embedder, task_vectors: np.ndarray | None = None,
                   task_query_vectors: np.ndarray | None = None, query_side: bool = True) -> SearchIndex:
    """Embed what the index needs (task texts as passages and, with `query_side`, for queries in
    another language, as queries (search.index.symmetric_text); exemplars and out-of-scope cases
    as queries; each text once, ever, thanks to the embedder's cache) and attach the vectors.
    `task_vectors`, `task_query_vectors`: the tasks' vectors where the caller has them already (a
    fit's folds). EmbeddingUnavailable propagates."""
    if task_vectors is None:
        task_vectors = embedder.embed([embedding_text(t) for t in index.tasks], "passage")
    if not query_side:
        task_query_vectors = None
    elif task_query_vectors is None:
        task_query_vectors = embedder.embed([symmetric_text(t) for t in index.tasks], "query")
    memory = index.exemplars
    exemplar_vectors = embedder.embed(list(memory.texts), "query") if memory.texts else np.zeros(
        (0, task_vectors.shape[1]), dtype=np.float32)
    oos_vectors = embedder.embed(list(memory.oos_texts), "query") if memory.oos_texts else None
    index = index.with_vectors(task_vectors, exemplar_vectors, oos_vectors, task_query_vectors)
    if index.learned is not None and index.exemplars.vectors is not None:
        floor = unrelated_cosine(index.exemplars.vectors, index.exemplars.task_rows)
        index = index.with_learned(index.learned.with_vectors(embedder.embed(list(index.learned.texts), "query"), floor))
    if index.written is not None:
        index = index.with_written(attach_vectors(index.written, embedder, task_vectors, task_query_vectors,
                                                  query_side))
    if index.trusted is not None:
        index = index.with_trusted(attach_vectors(index.trusted, embedder, task_vectors, task_query_vectors,
                                                  query_side))
    return index


def prototypes_of(index: SearchIndex) -> np.ndarray | None:
    """Softmax-regression prototypes over the index's exemplars (search.prototypes)."""
    memory = index.exemplars
    if memory.vectors is None:
        return None
    return fit_prototypes(memory.vectors, memory.task_rows, memory.n_tasks, memory.centroids)


def attach(index: SearchIndex, params: RankerParams | None, embedder, task_vectors: np.ndarray | None = None,
           prototypes: str = "fitted", task_query_vectors: np.ndarray | None = None) -> SearchIndex:
    """`index` with its vectors (`attach_vectors`; EmbeddingUnavailable propagates) and
    prototypes: "fitted", the fit's (`params`), as served; "centroids", each task's scaled
    exemplar centroid, the prototypes' starting point, where the fit has prototypes (the
    preview's cross-validation: the fitted ones would leak its held-out cases, and fitting them
    per fold takes seconds); "own", a softmax regression on the index's own exemplars (the fit's
    folds, `params` unread)."""
    # The tasks' query-side vectors serve a fit whose foreign weights were fitted on them
    # (search.fitting.foreign); a query in another language ranked by the shipped defaults, which
    # have none, or by the catalog's own weights, reads the passage view those were fitted on
    # (CLINC150 zero-shot, its Spanish val sample: Hit@1 0.540 so, 0.493 with the query-side view).
    query_side = params is None or params.foreign is not None
    index = attach_vectors(index, embedder, task_vectors, task_query_vectors, query_side)
    if prototypes == "centroids":
        if params.prototypes is not None and index.exemplars.centroids is not None:
            return index.with_prototypes(INIT_SCALE * index.exemplars.centroids)
        return index
    if prototypes == "own":
        index = index.with_prototypes(prototypes_of(index))
        if index.written is not None:
            index = index.with_written(index.written.with_prototypes(prototypes_of(index.written)))
        if index.trusted is not None:
            index = index.with_trusted(index.trusted.with_prototypes(prototypes_of(index.trusted)))
        return index
    index = index.with_prototypes(params.prototype_matrix(index))
    if index.written is not None:
        index = index.with_written(index.written.with_prototypes(params.prototype_matrix(index.written, "written")))
    if index.trusted is not None:
        index = index.with_trusted(index.trusted.with_prototypes(params.prototype_matrix(index.trusted, "trusted")))
    return index


def fold_index(settings: Settings, tasks: Sequence[TaskRecord], cases: Sequence[CaseRecord], use: Use,
               held_out: frozenset[str], left_out: frozenset[str], embedder=None,
               task_vectors: np.ndarray | None = None, task_query_vectors: np.ndarray | None = None) -> SearchIndex:
    """The index of one fold of the fit's cross-validation (search.fitting.cv_queries): its
    training `cases` and what `use` taught, minus the learned exemplars of its `held_out`
    queries (and, of the cases, those `left_out`: the held-out queries and their near copies);
    no written-cases-only index (a fold shows no contributions); with an `embedder`, its
    vectors and its own prototypes (`attach`, "own")."""
    index = build(settings, tasks, cases, use, IndexOptions(held_out=held_out, written=False,
                                                            cases_held_out=left_out))
    if embedder is None:
        return index
    return attach(index, None, embedder, task_vectors, prototypes="own", task_query_vectors=task_query_vectors)
