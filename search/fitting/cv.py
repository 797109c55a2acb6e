"""Cross-validated signal values: the evidence every part of a fit is chosen on.

`cv_queries`: the cases are split into FOLDS folds (catalog.splits.k_folds: a hash of each query,
so the split is stable as the suite grows); each fold's cases are scored by an index whose lexicon
and exemplar memory are built from the OTHER folds only, exactly as an unseen query would be
(k-fold cross-validation: Stone 1974, "Cross-validatory choice and assessment of statistical
predictions", JRSS B 36). Each held-out query becomes a `CVQuery`: its signal values over every
active task, which the fit re-fuses as often as it likes (search.fitting.weights, .metrics).

Two context objects carry what the passes need: `FitContext`, what a fit is made on (settings,
tasks, cases, embedder, seed, CV sample size) with the memo of the fold indexes its passes share,
and `CVPass`, what one pass scores beside the held-out cases (negatives, learned exemplars, typed
prefixes) and how its folds are cut.

A fold's index is search.assembly's recipe (`fold_index`), and its queries are ranked by the
pipeline (search.pipeline) as every other part ranks them: a held-out case, a negative, is a
query a person submitted (search.request.SearchRequest.of_case), a prefix of one is typed
(`SearchRequest.typed`: the typing pass's cuts), every active task visible, no pins.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

import numpy as np

from catalog.records import CaseRecord, TaskRecord
from catalog.splits import bucket, hash_folds
from lexicon.language import in_other_language
from lexicon.text import terms
from search.assembly import Use, fold_index
from search.index import SearchIndex, embedding_text, symmetric_text
from search.learned import LearnedExemplar, normalised_query
from search.pipeline import make_pipeline
from search.prefilter import sparse_values
from search.query import AnalysedQuery
from search.ranker import MODES, default_params
from search.request import EVERYONE, SearchRequest
from search.signal import embedding
from settings import Settings

if TYPE_CHECKING:
    from search.embeddings import Embedder

FOLDS = 5
MAX_CV_QUERIES = 3000


def cases_digest(tasks: Sequence[TaskRecord], cases: Sequence[CaseRecord]) -> str:
    """Names the data a fit was made on: the active task ids and every case's query and gold."""
    payload = json.dumps([sorted(t.id for t in tasks if t.active),
                          sorted([c.query, sorted(c.gold)] for c in cases)], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class FitContext:
    """What a fit is made on and how its CV samples: the settings it reads, the catalog's tasks,
    its test cases, the embedder (None: the sparse signals only), the seed of its folds and
    samples, and the most in-scope cases one CV pass scores (a stable hash sample; None: all).

    `fold_indexes`: the memo of the fold indexes the fit's CV passes build (vectors and
    prototypes attached), keyed by their training cases (cv_queries). It is valid for these
    settings, tasks and embedder only: derive another context with `sample` (another sample
    size, the same memo), never by replacing those."""

    settings: Settings
    tasks: Sequence[TaskRecord]
    cases: Sequence[CaseRecord]
    embedder: Embedder | None = None
    seed: int = 42
    max_queries: int | None = MAX_CV_QUERIES
    fold_indexes: dict | None = field(default_factory=dict, repr=False, compare=False)

    @property
    def modes(self) -> list[str]:
        """The modes a fit fits: full (with embeddings) and sparse, or sparse alone."""
        return [m for m in MODES if m == "sparse" or self.embedder is not None]

    @property
    def primary(self) -> str:
        """The mode most of a fit's choices are judged in: full with embeddings, else sparse."""
        return "full" if "full" in self.modes else "sparse"

    def sample(self, max_queries: int | None) -> FitContext:
        """The same context scoring up to `max_queries` in-scope cases per pass (its memo kept)."""
        return replace(self, max_queries=max_queries)


@dataclass(frozen=True)
class CVPass:
    """What one CV pass scores beside each fold's held-out cases, and how its folds are cut.

    `negatives` ((source, query), see negative_evidence): each given a fold by the hash of its
    query and scored against that fold's index, as CV queries without gold of that source.
    `learned`: exemplars learned from use (search.learned); each fold's index has those whose
    query is not one of the fold's held-out queries, so the `learned` signal's weight is fitted
    on how well use predicts queries it has not seen. `learned_as_cases`: learned exemplars that
    also join each fold's cases (search.learned.learned_cases: exemplar memory and lexicon), but
    for the fold's held-out queries and their near copies (near_copies).
    `assignment`: each case's fold, when not the hash of its query (catalog.splits.k_folds): the
    abstention's calibration keeps cases written together in one fold (calibration_folds).
    `variants`: each held-out in-scope case is scored as these texts of its query instead (the
    prefixes a person types on the way to it: typing_cuts), gold unchanged; `keep`: which of the
    analysed queries are kept (typing_queries: those read as still being typed); `typing`: what the
    variants' requests say of it (SearchRequest.typed: True, as the widget sends a keystroke; None,
    the prefilter's reading). `folds`: how many."""

    negatives: Sequence[tuple[str, str]] = ()
    learned: Sequence[LearnedExemplar] = ()
    learned_as_cases: Sequence[LearnedExemplar] = ()
    assignment: Sequence[int] | None = None
    variants: Callable[[str], Sequence[str]] | None = None
    keep: Callable[[AnalysedQuery], bool] | None = None
    typing: bool | None = None
    folds: int = FOLDS


@dataclass(frozen=True)
class CVQuery:
    """One held-out case's signal values over every active task, as the product computes them."""

    case: CaseRecord
    fold: int
    tasks: tuple[TaskRecord, ...]
    values: dict[str, np.ndarray]
    out_of_scope_similarity: float | None
    pinned: tuple[str, ...] = ()       # gold of a training case with this very query (held-out replay only)
    source: str = "case"               # "case" (a test case) or a kind of negative (fit_abstention)
    unfinished: int = 0                # the typing class (AnalysedQuery.unfinished), 0: a whole query
    judged_as: int = 0                 # the abstention class (AnalysedQuery.judged_as)
    # the `embedding` signal as the same query would have it written in another language than the
    # catalog's (the cosine to the tasks' query-side vectors, search.signal.embedding), or None
    # (no vectors); what search.fitting.foreign fits the foreign weights on
    foreign_embedding: np.ndarray | None = None

    def gold_rows(self) -> list[int]:
        """The positions of the case's gold tasks among `tasks` (computed once: a fit reads them
        for every weight set it tries, ~44,000 times in a fit of the demo)."""
        return list(self._gold_rows)

    @cached_property
    def designs(self) -> dict:
        """This query's rows of the fusion fit's design, per (signal names, prior weights): what
        search.fitting.weights.design_matrices computed for it once (a fit asks for the same rows
        once per fold and weight set it tries, 60 times in a demo fit)."""
        return {}

    @cached_property
    def _gold_rows(self) -> tuple[int, ...]:
        gold = set(self.case.gold)
        return tuple(i for i, t in enumerate(self.tasks) if t.id in gold)

    def values_for(self, mode: str) -> dict[str, np.ndarray]:
        if mode == "full":
            return self.values
        return sparse_values(self.values)


# A learned query whose terms overlap a held-out query's this much (Jaccard) is that query in
# other clothes: the as-cases CV leaves it out of the held-out query's fold (near_copies).
NEAR_COPY_JACCARD = 0.5


def near_copies(learned_queries: Iterable[str], held_queries: Iterable[str],
                min_jaccard: float = NEAR_COPY_JACCARD) -> frozenset[str]:
    """The learned queries that are near copies of a held-out one: term sets (lexicon.text.terms,
    stemmed, stopwords dropped) with Jaccard |a & b| / |a | b| >= min_jaccard to some held-out
    query's.

    Why (issue 33 item 1): the as-cases test (search.fitting.learned.choose_learned_as_cases)
    scores each written case by a fold index holding the learned exemplars as cases. Cover traffic that
    searches the public test cases' own queries ("<case> please": "please" is a stopword) and
    clicks their top result puts each held-out case's answer into its own fold, so the exemplars
    looked like they generalise and were taken, a wrong pair from the same networks among them
    (12 networks on the demo: the wrong task 10 -> 2). A held-out query's own text is already
    left out of its fold; so is now any query that is the same words give or take a few. An
    honest paraphrase ("how much money do i have" for "what's my balance") shares few terms and
    stays: the simulator's curve is measured in docs/learning-from-use.md section 4."""
    held = [frozenset(terms(q)) for q in held_queries]
    by_term: dict[str, list[int]] = {}
    for i, term_set in enumerate(held):
        for term in term_set:
            by_term.setdefault(term, []).append(i)
    near = set()
    for query in learned_queries:
        mine = frozenset(terms(query))
        if not mine:
            continue
        candidates = {i for term in mine for i in by_term.get(term, ())}
        if any(len(mine & held[i]) >= min_jaccard * len(mine | held[i]) for i in candidates):
            near.add(query)
    return frozenset(near)


def _fold_index(context: FitContext, tasks: Sequence[TaskRecord], fit: Sequence[CaseRecord], task_vectors,
                task_query_vectors, cv: CVPass, held_queries: frozenset[str]) -> SearchIndex:
    """The index of one CV fold (search.assembly.fold_index): its training cases (plus the
    learned exemplars of queries it does not hold out), with vectors and its own prototypes
    where there is an embedder. No held-out query is among its cases, nor a near copy of one."""
    left_out = held_queries | near_copies({e.query for e in cv.learned_as_cases}, held_queries)
    return fold_index(context.settings, tasks, fit, Use(cv.learned_as_cases, cv.learned), held_queries, left_out,
                      context.embedder, task_vectors, task_query_vectors)


def with_translations(cases: Sequence[CaseRecord], assignment: list[int], embedder) -> list[int]:
    """`assignment` (each case's fold) with every in-scope case written in another language than
    the catalog's moved to the fold of the case it most likely translates: of the catalog-language
    cases sharing a gold task, the nearest by the embedding model (cosine of the query vectors).

    Why (issue 46): a case and its translation are one request written twice. Held out in
    different folds, each finds the other in its fold's memory, across languages, and the CV
    evidence runs optimistic: with the 41 Spanish translations of demo cases added (every
    English original in the training split), the English held-out queries' in-scope refusals
    went 0.075 -> 0.175, their CV refusals staying at the 5% budget (the threshold learnt on
    twins that find each other). A Spanish case written afresh joins its nearest English
    sibling's fold: its CV is a little pessimistic, never leaked. A catalog without cases in
    other languages (or without an embedder) keeps `assignment` as it is."""
    other = [i for i, c in enumerate(cases) if c.gold and in_other_language(c.query)]
    if not other or embedder is None:
        return assignment
    moved = set(other)
    own = [i for i, c in enumerate(cases) if c.gold and i not in moved]
    by_task: dict[str, list[int]] = {}
    for i in own:
        for task in cases[i].gold:
            by_task.setdefault(task, []).append(i)
    vectors = embedder.embed([c.query for c in cases], "query")
    out = list(assignment)
    for i in other:
        siblings = sorted({j for task in cases[i].gold for j in by_task.get(task, ())})
        if siblings:
            nearest = siblings[int(np.argmax(vectors[siblings] @ vectors[i]))]
            out[i] = assignment[nearest]
    return out


def cv_folds(cases: Sequence[CaseRecord], folds: int, seed: int, embedder,
             assignment: Sequence[int] | None = None) -> list[tuple[list[CaseRecord], list[CaseRecord]]]:
    """(fit, held) of each fold: the cases' hash folds (catalog.splits.hash_folds) or `assignment`,
    each translation held out with the case it translates (with_translations). The one way every
    cross-validation of a fit, and the preview's (evaluation.impact), cuts its folds."""
    assigned = with_translations(cases, list(assignment) if assignment is not None else hash_folds(cases, folds, seed),
                                 embedder)
    return [([c for c, a in zip(cases, assigned) if a != f], [c for c, a in zip(cases, assigned) if a == f])
            for f in range(folds)]


def cv_queries(context: FitContext, cv: CVPass = CVPass(), progress: Callable | None = None) -> list[CVQuery]:
    """Signal values of the context's cases, each scored by an index built without its fold. With
    `context.max_queries`, a stable hash sample of the in-scope held-out queries plus every
    out-of-scope one is scored (each fold's index still learns from all the other folds' cases).
    What the pass scores beside them (negatives, learned exemplars, prefixes) and how its folds
    are cut: `cv` (CVPass). `progress(fold, folds)` hears of each fold scored.
    `context.fold_indexes`: one fit's memo of the fold indexes it built (vectors and prototypes
    attached), keyed by their training cases: the typing and calibration passes reuse the fit's
    own folds where they are the same (the prototypes' regression is most of a fold's cost: 10 of
    the demo fit's 31 s went to building the typing pass's folds again). Not used with learned
    exemplars, whose memory depends on the held-out queries."""
    settings, cases, embedder, seed = context.settings, context.cases, context.embedder, context.seed
    folds, negatives, max_queries, memo = cv.folds, cv.negatives, context.max_queries, context.fold_indexes
    defaults = default_params(settings)   # the pipeline's fit: scoring every signal reads none of it
    tasks = [t for t in context.tasks if t.active]
    negative_fold = [int(bucket(seed + 1, query) * folds) for _, query in negatives]
    sampled = None
    if max_queries is not None and len(cases) > max_queries:
        # every out-of-scope case is kept (they are few and they are what abstention learns from)
        oos = [c for c in cases if not c.gold]
        in_scope = sorted((c for c in cases if c.gold), key=lambda c: bucket(seed + 2, c.query))
        sampled = {c.query for c in [*oos, *in_scope[:max(max_queries - len(oos), 0)]]}
    task_vectors = task_query_vectors = None
    if embedder is not None:
        task_vectors = embedder.embed([embedding_text(t) for t in tasks], "passage")
        task_query_vectors = embedder.embed([symmetric_text(t) for t in tasks], "query")
    out: list[CVQuery] = []
    split = cv_folds(list(cases), folds, seed, embedder, cv.assignment)
    for fold, (fit, held) in enumerate(split):
        if sampled is not None:
            held = [c for c in held if c.query in sampled]
        typed = cv.variants is not None   # the held-out cases' prefixes, typed on the way to them
        if typed:
            held = [replace(c, query=text) for c in held if c.gold for text in cv.variants(c.query)]
        sources = ["case"] * len(held) + [source for (source, _), f in zip(negatives, negative_fold) if f == fold]
        unseen = [CaseRecord(query=query, gold=()) for (_, query), f in zip(negatives, negative_fold) if f == fold]
        # every active task visible, no pins: the held-out query is unseen by construction
        requests = [SearchRequest.typed(c.query, EVERYONE, typing=cv.typing, pins=False) if typed else
                    SearchRequest.of_case(c.query, EVERYONE, pins=False) for c in held]
        requests += [SearchRequest.of_case(c.query, EVERYONE, pins=False) for c in unseen]
        held = held + unseen
        if not held:
            continue
        held_queries = frozenset(normalised_query(c.query) for c in held)
        key = (embedder is not None, tuple((c.query, c.gold) for c in fit)) if not (cv.learned or cv.learned_as_cases) else None
        index = memo.get(key) if memo is not None and key is not None else None
        if index is None:
            index = _fold_index(context, tasks, fit, task_vectors, task_query_vectors, cv, held_queries)
            if memo is not None and key is not None:
                memo[key] = index
        pipeline = make_pipeline(index, defaults, settings, embedder)
        analysed = [pipeline.analyse(request) for request in requests]
        vectors = pipeline.embed(analysed)
        for case, request, query, vector, source in zip(held, requests, analysed, vectors, sources):
            if cv.keep is not None and not cv.keep(query):
                continue
            scored = pipeline.score(request, query, vector)   # every signal, every active task
            out.append(CVQuery(case, fold, scored.tasks, scored.values, scored.out_of_scope_similarity, source=source,
                               unfinished=query.unfinished, judged_as=query.judged_as,
                               foreign_embedding=embedding.foreign_value(index, scored.rows, vector)))
        if progress is not None:
            progress(fold + 1, folds)
    return out
