"""The impact of a catalog or test-case change on the ranking, measured before it is published.

`change_impact(serving, before, after, queries, viewer)` compares the catalog as it is (`before`,
a `Side`: tasks, test cases and the fit that ranks them) with the catalog as the change would
leave it (`after`, with the fit that will serve it once published; nothing is refitted here):

- **lexicon links** the change adds and removes (term -> task, lexicon.rationale), and those
  whose number of supporting test cases changes, with each link's rationale weight in the index;
- **the edited queries**: their top 5 before and after;
- **every test case whose top 5 would change**, before and after;
- **cross-validated Hit@5 and MRR** of the whole suite before and after, and the test cases
  that newly fail or pass under cross-validation.

The admin's preview (admin.preview) asks for it and renders it; this module knows nothing of
the web. Every index is search.assembly's recipe and every ranking goes through the pipeline
(search.pipeline.make_pipeline), with the request every other part builds for a test case.

What the rankings show. The top 5 of an edited query and of a test case is what a user would
see for that exact text, as serving.service.SearchService answers it without the LLM: the
request of a test case (search.request.SearchRequest.of_case: submitted, never "still being
typed"; the admin's case page asks the service the same way), the active tasks the chosen
`viewer` may see (search.request.Viewer: PUBLIC, the default, sees unrestricted tasks only; a
role sees those and the tasks of that role; EVERYONE every active task), a test case's exact
query pinned to its gold tasks first (lexicon.rationale.pin_key), and search.confidence.assess
applied ("no confident match"). Gold tasks the viewer cannot see are listed in `hidden_gold`:
the page warns that this viewer will never be shown them. A pinned case therefore stays right as
long as its gold tasks exist; what it can lose is the rest of its top 5. A test case is judged
by the gold it will have once the change is published (its old gold when the change deletes
it). Out-of-scope cases (no gold) are listed when their answer changes.

Out-of-scope test cases (no gold) do not rank anything: they teach the "no confident match"
decision. `abstention` (an AbstentionNote) says what the preview can show of that: whether the
ranker now holds a fitted abstention model for this mode, how many out-of-scope cases the
catalog has before and after, and how many the fit needs. The edited query's `abstained` before
and after is the outcome: publishing adds the query to the out-of-scope memory at once (its
similarity to the nearest out-of-scope case is one of the model's features), while the model
itself is refitted by the next fit (nothing is refitted here).

Cross-validation is what says whether the change generalises, or breaks paraphrases of other
cases: the cases are split into 5 folds by a hash of their query (catalog.splits.k_folds, seed
42, the folds of the ranker fit, so a case keeps its fold when others are added or edited); for
each fold, an index is built without that fold's cases and the fold's in-scope queries are
ranked by it, every active task visible, without pins and without abstention (the fit's CV
convention, search.fitting.cv_queries). Hit@5 is the share with a gold task in the top 5, MRR
the mean reciprocal rank of the first gold task within the top 50. The prototype signal of a
fold's index is its starting point, the scaled centroids of that fold's exemplars
(search.assembly.attach, "centroids"): the fitted prototypes learnt every case (they would leak
the held-out ones into the ranking) and refitting them per fold takes seconds per fold.

Learned evidence. The indexes rank with the exemplars learned from use that the live fit
weighed (`params.learned`, search.learned; the service has already dropped the pairs the admin
blocked since), as the live ranking does: the rankings shown include the `learned` signal, and
so do the CV figures, where each fold's index leaves out the learned exemplars whose query is
one of the fold's held-out queries (the fit's convention), so that use cannot leak a held-out
case's answer into its own evaluation. Where the fit put the learned exemplars in the exemplar
memory and lexicon (`params.learned_as_cases`), every index here holds them too
(search.learned.learned_cases, minus a fold's held-out queries).

Speed (about 2 s on the demo catalog, `ops/bench_preview.py`): the task half of every index
(search.index.TaskText) and the task vectors are computed once per task list; every text is
embedded once per preview (MemoEmbedder in front of the service's cached embedder); an index
whose tasks and cases are the same as another's (before and after of a fold the change does not
touch, a no-op change) is built and queried once. An `ImpactMemo` keeps the last few reports and
each side's cross-validated ranks across previews.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from typing import Callable, Iterable, Mapping, Protocol, Sequence

import numpy as np

from catalog.records import CaseRecord, TaskRecord
from evaluation.metrics import gold_rank
from lexicon.rationale import PROSE_MAX_DF, RationaleLexicon, pin_key, prose_terms
from lexicon.text import stem, words
from search.assembly import IndexOptions, attach, serving_index
from search.confidence import shown
from search.embeddings import EmbeddingUnavailable, MemoEmbedder
from search.fitting import FOLDS
from search.fitting.cv import cv_folds
from search.index import Enrichment, SearchIndex, TaskText, analyse_tasks, embedding_text, symmetric_text
from search.learned import normalised_query
from search.lru import LRU
from search.pipeline import Pipeline, make_pipeline
from search.ranker import RankerParams
from search.request import EVERYONE, PUBLIC, SearchRequest, Viewer
from settings import Settings

TOP_K = 5            # the rankings shown and compared
CV_SEED = 42         # the ranker fit's folds (search.fitting.fit_ranker's default seed)
CV_DEPTH = 50        # MRR counts a gold task within the top 50 (the fit's CV depth)


# -- the report ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class RankedTask:
    id: str
    name: str
    score: float         # fused score relative to the average task (the API's `score`)
    pinned: bool = False


@dataclass(frozen=True)
class Ranking:
    """One query's top 5 as a user would see it (after the score-tail cut), and where its first
    gold task is."""

    tasks: tuple[RankedTask, ...]
    gold_rank: int | None        # 1-based, within the top CV_DEPTH; None: further down or no gold
    abstained: bool = False      # the abstention model would answer "no confident match"

    def shown_ids(self) -> tuple[str, ...]:
        return () if self.abstained else tuple(t.id for t in self.tasks)

    def hit(self) -> bool:
        """A gold task is shown: `tasks` is a prefix of the ranking (the tail cut keeps one)."""
        return not self.abstained and self.gold_rank is not None and self.gold_rank <= len(self.tasks)


@dataclass(frozen=True)
class QueryComparison:
    query: str
    gold: tuple[str, ...]        # the gold judged by (after the change; before when it deletes the case)
    before: Ranking
    after: Ranking
    status: str                  # broken | fixed | moved | unchanged | out_of_scope

    @property
    def changed(self) -> bool:
        return self.before.shown_ids() != self.after.shown_ids()


@dataclass(frozen=True)
class LexiconLink:
    term: str                    # the stemmed term as the index holds it
    surface: tuple[str, ...]     # words of the changed cases that stem to it (for reading)
    task_id: str
    task_name: str
    cases_before: int            # test cases linking term and task
    cases_after: int
    weight_before: float | None  # the link's rationale weight in the index (None: no such link)
    weight_after: float | None


@dataclass(frozen=True)
class CVFigures:
    n: int                       # in-scope cases scored
    hit_at_5: float | None
    mrr: float | None


@dataclass(frozen=True)
class CVChange:
    query: str
    gold: tuple[str, ...]
    rank_before: int | None      # cross-validated rank of the first gold task
    rank_after: int | None


@dataclass(frozen=True)
class HiddenGold:
    task_id: str
    task_name: str
    roles: tuple[str, ...]       # the roles that may see it (the viewer holds none of them)
    queries: tuple[str, ...]     # the shown queries (edited, or changed cases) it is the gold of


@dataclass(frozen=True)
class AbstentionNote:
    """What the preview can say about "no confident match" (module docstring)."""

    model: bool                  # the live ranker holds a fitted abstention model for this mode
    fitted_oos: int | None       # written out-of-scope cases that model was fitted on (None: unknown / no model)
    oos_before: int              # out-of-scope test cases in the catalog, before and after
    oos_after: int
    enabled: bool                # settings.abstain
    kind: str | None = None      # "one-class" (in-scope cases alone) or "discriminative" (with negatives)
    other_negatives: int = 0     # the other negatives it was fitted on (generic off-topic, unclicked queries)


@dataclass(frozen=True)
class ImpactReport:
    queries: tuple[QueryComparison, ...]
    links_added: tuple[LexiconLink, ...]
    links_removed: tuple[LexiconLink, ...]
    links_changed: tuple[LexiconLink, ...]
    changed_cases: tuple[QueryComparison, ...]
    cv_before: CVFigures
    cv_after: CVFigures
    newly_failing: tuple[CVChange, ...]
    newly_passing: tuple[CVChange, ...]
    mode: str                    # "full" (embeddings) or "sparse" (embeddings unavailable)
    ranker: dict                 # which parameters ranked (source, fit id)
    elapsed_ms: float
    view_as: str = ""            # whose rankings these are: the viewer's admin name (search.request.Viewer.name)
    roles: tuple[str, ...] = ()  # the roles of the catalog's tasks (the viewers one may pick)
    hidden_gold: tuple[HiddenGold, ...] = ()
    abstention: AbstentionNote | None = None
    # words of the changed cases' rationales that link no task: the prose most rationales use
    # (lexicon.rationale.prose_terms), evidence only where the case's own query has them
    prose_words: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        """JSON-safe (plain dicts, lists, strings, numbers, booleans and None)."""
        out = asdict(self)
        out["viewer"] = Viewer.named(self.view_as).label
        for key in ("queries", "changed_cases"):
            for row, comparison in zip(out[key], getattr(self, key)):
                row["changed"] = comparison.changed
        out["cv_delta"] = {
            "hit_at_5": _delta(self.cv_before.hit_at_5, self.cv_after.hit_at_5),
            "mrr": _delta(self.cv_before.mrr, self.cv_after.mrr),
        }
        return _plain(out)


def _delta(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else round(after - before, 4)


def _plain(value):
    """Tuples to lists, numpy scalars to Python numbers (json.dumps-able)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


# -- what it is asked of ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Side:
    """One side of a change: the tasks and test cases, and the fit that ranks them."""

    tasks: Sequence[TaskRecord]
    cases: Sequence[CaseRecord]
    params: RankerParams
    refit_s: float | None = None   # an automatic refit follows publishing (after_fit): its last duration


class Live(Protocol):
    """What serves now (serving.service.LiveIndex is one): its index (with vectors where
    `vectors_ok`), the test cases it was built from and the fit it ranks with."""

    index: SearchIndex
    cases: Sequence[CaseRecord]
    params: RankerParams
    vectors_ok: bool


@dataclass(frozen=True)
class Serving:
    """What the impact ranks with: the settings, the embedder (the service's cached one; None:
    the sparse mode), the task enrichment (kb.enrich; None: none) and the live state `live`,
    whose index and embeddings it reuses and whose identity keys the memo (any reload, refit or
    publish is another state)."""

    settings: Settings
    embedder: object | None
    enrichment: Callable[[Sequence[TaskRecord]], Enrichment] | None
    live: Live


# -- indexes, built once each ----------------------------------------------------------------------
@dataclass
class _Indexed:
    """An index and the fit that ranks with it (a Pipeline), and the rankings already asked of
    it (an index shared by before and after answers each query once)."""

    pipeline: Pipeline
    rankings: dict = field(default_factory=dict)

    @property
    def index(self) -> SearchIndex:
        return self.pipeline.index


class _Workbench:
    """Builds the indexes one preview needs (search.assembly), reusing the case-independent
    parts: the analysed task text and task vectors per task list, every embedding (memoised), and
    whole indexes whose tasks, cases and fit repeat; and ranks with them (search.pipeline).
    Lives for one preview."""

    def __init__(self, serving: Serving, embedder, viewer: Viewer, memo: ImpactMemo | None):
        self.settings, self.enrichment, self.live = serving.settings, serving.enrichment, serving.live
        self.viewer = viewer
        self.memo = memo   # cross-validated ranks kept across previews (_cv_ranks)
        self.embedder = MemoEmbedder(embedder) if embedder is not None else None
        live_index = serving.live.index
        if self.embedder is not None and live_index.has_vectors:
            # the live index holds the vectors of the current tasks and case queries already
            memory = live_index.exemplars
            self.embedder.remember("passage", [embedding_text(t) for t in live_index.tasks], live_index.task_vectors)
            if live_index.task_query_vectors is not None:
                self.embedder.remember("query", [symmetric_text(t) for t in live_index.tasks],
                                       live_index.task_query_vectors)
            self.embedder.remember("query", memory.texts, memory.vectors)
            self.embedder.remember("query", memory.oos_texts, memory.oos_vectors)
            if live_index.learned is not None and live_index.learned.vectors is not None:
                self.embedder.remember("query", live_index.learned.texts, live_index.learned.vectors)
        self._task_text: dict[tuple, TaskText] = {}
        self._task_vectors: dict[tuple, np.ndarray] = {}
        self._indexes: dict[tuple, _Indexed] = {}
        self._params: dict[int, RankerParams] = {}   # keeps each keyed fit alive (keys hold its id)

    def _key(self, tasks, cases, params: RankerParams, fitted_prototypes: bool, held_out) -> tuple:
        self._params[id(params)] = params
        return tuple(t for t in tasks if t.active), tuple(cases), id(params), fitted_prototypes, held_out

    def adopt(self, index: SearchIndex, cases: Sequence[CaseRecord], params: RankerParams) -> None:
        """Use a live index (built by the service from these active tasks and `cases` for
        `params`, with its vectors and fitted prototypes) instead of building the same again.
        Its rankings are kept in the bench's memo for the next preview of the same live state
        and viewer: every preview ranks every test case on its before side (changed_cases), the
        same work until the next publish (the demo: ~430 rankings, a fifth of a preview)."""
        key = self._key(index.tasks, cases, params, True, frozenset())
        rankings: dict = {} if self.memo is None else self.memo.get_or_make(
            ("rankings", id(self.live), id(params), self.viewer), (self.live, params), dict)
        self._indexes[key] = _Indexed(make_pipeline(index, params, self.settings, self.embedder), rankings)

    def index(self, tasks: Sequence[TaskRecord], cases: Sequence[CaseRecord], params: RankerParams,
              fitted_prototypes: bool, held_out: frozenset[str] = frozenset()) -> _Indexed:
        """The index `params` would serve for the active `tasks` and `cases`
        (search.assembly.serving_index). `fitted_prototypes`: rank the prototype signal with the
        fitted prototypes (the live ranking) rather than the cases' own scaled centroids
        (cross-validation; see the module docstring). `held_out`: normalised queries whose
        learned exemplars the index leaves out (a CV fold's held-out queries)."""
        key = self._key(tasks, cases, params, fitted_prototypes, held_out)
        if key not in self._indexes:
            self._indexes[key] = self._build(key[0], key[1], params, fitted_prototypes, held_out)
        return self._indexes[key]

    def _build(self, tasks: tuple[TaskRecord, ...], cases: tuple[CaseRecord, ...], params: RankerParams,
               fitted_prototypes: bool, held_out: frozenset[str] = frozenset()) -> _Indexed:
        if tasks not in self._task_text:
            enrichment = self.enrichment(tasks) if self.enrichment is not None else None
            self._task_text[tasks] = analyse_tasks(tasks, self.settings.field_weights, enrichment)
        index = serving_index(self.settings, tasks, cases, params,
                              IndexOptions(task_text=self._task_text[tasks], held_out=held_out, written=False))
        if self.embedder is not None and tasks:
            if tasks not in self._task_vectors:
                self._task_vectors[tasks] = self.embedder.embed([embedding_text(t) for t in tasks], "passage")
            index = attach(index, params, self.embedder, self._task_vectors[tasks],
                           prototypes="fitted" if fitted_prototypes else "centroids")
        return _Indexed(make_pipeline(index, params, self.settings, self.embedder))

    def rank(self, side: _Indexed, query: str, gold: Iterable[str]) -> Ranking:
        """The test case `query` ranked by `side` as the bench's viewer sees it: with pins,
        abstention and the tail cut (what a user would see)."""
        gold = tuple(gold)
        key = (query, gold)
        if key not in side.rankings:
            side.rankings[key] = self._rank(side, query, gold)
        return side.rankings[key]

    def _rank(self, side: _Indexed, query: str, gold: tuple[str, ...]) -> Ranking:
        pipeline = side.pipeline
        request = SearchRequest.of_case(query, self.viewer, k=CV_DEPTH, pins=True, explain=False)
        analysed = _rankable(pipeline, request)
        if analysed is None:
            return Ranking((), None, abstained=True)
        ranked = pipeline.rank(request, analysed, pipeline.embed([analysed])[0])
        ids = [item.task.id for item in ranked.result.ranked]
        # what the tail cut shows (kept when refused: Ranking.shown_ids says what is shown then)
        tasks = tuple(RankedTask(item.task.id, item.task.name, item.score, item.pinned)
                      for item in shown(ranked.result.ranked[:TOP_K], ranked.tail))
        abstained = not ranked.answered   # search.confidence decides, as for SearchService.search
        return Ranking(tasks, gold_rank(ids, set(gold)) if gold else None, abstained)

    def cv_rank(self, side: _Indexed, query: str, gold: Iterable[str]) -> int | None:
        """The rank of the test case `query`'s first `gold` task as the cross-validation ranks it:
        every active task visible, no pins, no abstention, read off the ranked ids alone
        (Pipeline.ranked_ids; a preview cross-validates every case on both sides, and building
        the 50 positions' results of each was most of its ranking time)."""
        gold = tuple(gold)
        pipeline = side.pipeline
        request = SearchRequest.of_case(query, EVERYONE, k=CV_DEPTH, pins=False, explain=False)
        analysed = _rankable(pipeline, request) if gold else None
        if analysed is None:
            return None
        return gold_rank(pipeline.ranked_ids(request, analysed, pipeline.embed([analysed])[0], CV_DEPTH), set(gold))


def _rankable(pipeline: Pipeline, request: SearchRequest):
    """The request's analysed query, or None where nothing can rank it: a query without a word,
    or a viewer who may see no task."""
    analysed = pipeline.analyse(request)
    if not analysed.words or not pipeline.index.visible(*request.viewer.visible())[1]:
        return None
    return analysed


# -- the parts of the report -----------------------------------------------------------------------
def compare_query(bench: _Workbench, before: _Indexed, after: _Indexed, query: str, gold: tuple[str, ...]) -> QueryComparison:
    ranked_before = bench.rank(before, query, gold)
    ranked_after = bench.rank(after, query, gold)
    return QueryComparison(query, gold, ranked_before, ranked_after, _status(gold, ranked_before, ranked_after))


def _status(gold: tuple[str, ...], before: Ranking, after: Ranking) -> str:
    if not gold:
        return "out_of_scope"
    if before.hit() and not after.hit():
        return "broken"
    if after.hit() and not before.hit():
        return "fixed"
    return "moved" if before.shown_ids() != after.shown_ids() else "unchanged"


SEVERITY = {"broken": 0, "fixed": 1, "out_of_scope": 2, "moved": 3, "unchanged": 4}


def changed_cases(bench: _Workbench, before: _Indexed, after: _Indexed, before_cases: Sequence[CaseRecord],
                  after_cases: Sequence[CaseRecord]) -> list[QueryComparison]:
    """Every test case (of either side) whose shown top 5 differs; broken ones first, then
    fixed, then the rest, each group by how far the gold task moved."""
    gold_of = judged_gold(before_cases, after_cases)
    found = []
    for query, gold in gold_of.items():
        comparison = compare_query(bench, before, after, query, gold)
        if comparison.changed:
            found.append(comparison)

    def order(c: QueryComparison):
        moved = abs((c.after.gold_rank or CV_DEPTH + 1) - (c.before.gold_rank or CV_DEPTH + 1))
        return SEVERITY[c.status], -moved, c.query.casefold()

    return sorted(found, key=order)


def judged_gold(before_cases: Sequence[CaseRecord], after_cases: Sequence[CaseRecord]) -> dict[str, tuple[str, ...]]:
    """query -> the gold it is judged by: its gold after the change, or before when the change
    deletes it (queries are unique in the store; a repeated one keeps its first gold)."""
    gold: dict[str, tuple[str, ...]] = {}
    for case in [*after_cases, *before_cases]:
        gold.setdefault(case.query, tuple(case.gold))
    return gold


def lexicon_changes(before: _Indexed, after: _Indexed, changed: Iterable[CaseRecord],
                    names: Mapping[str, str]) -> tuple[list[LexiconLink], list[LexiconLink], list[LexiconLink]]:
    """(added, removed, changed count) term -> task links; `changed`: the cases on one side
    only (their words name the terms)."""
    lex_before, lex_after = before.index.lexicon, after.index.lexicon
    surface: dict[str, set[str]] = {}
    for case in changed:
        for word in words(f"{case.query} {case.rationale}"):
            surface.setdefault(stem(word), set()).add(word)
    added, removed, recounted = [], [], []
    for term in sorted(set(lex_before.associations) | set(lex_after.associations)):
        was, now = lex_before.tasks_for(term), lex_after.tasks_for(term)
        for task_id in sorted(set(was) | set(now)):
            if was.get(task_id, 0) == now.get(task_id, 0):
                continue
            link = LexiconLink(term, tuple(sorted(surface.get(term, ()))), task_id, names.get(task_id, task_id),
                               was.get(task_id, 0), now.get(task_id, 0),
                               _link_weight(before.index, term, task_id), _link_weight(after.index, term, task_id))
            (added if task_id not in was else removed if task_id not in now else recounted).append(link)
    return added, removed, recounted


def _link_weight(index: SearchIndex, term: str, task_id: str) -> float | None:
    column = index.vocabulary.get(term)
    row = next((r for r, t in enumerate(index.tasks) if t.id == task_id), None)
    if column is None or row is None:
        return None
    weight = float(index.rationale[row, column])
    return round(weight, 4) if weight else None


def cross_validate(bench: _Workbench, before: Side, after: Side
                   ) -> tuple[CVFigures, CVFigures, list[CVChange], list[CVChange]]:
    """CV figures before and after (each side with the fit that ranks it), and the cases
    (present on both sides, judged by the gold of each side) whose CV Hit@5 flips (see the
    module docstring)."""
    before = _cv_ranks(bench, before.tasks, before.cases, before.params)
    after = _cv_ranks(bench, after.tasks, after.cases, after.params)
    failing, passing = [], []
    for key in sorted(set(before) & set(after)):
        was, now = before[key], after[key]
        change = CVChange(key, now[0], was[1], now[1])
        if _cv_hit(was[1]) and not _cv_hit(now[1]):
            failing.append(change)
        elif _cv_hit(now[1]) and not _cv_hit(was[1]):
            passing.append(change)
    return _figures(before), _figures(after), failing, passing


def _cv_ranks(bench: _Workbench, tasks, cases, params: RankerParams) -> dict[str, tuple[tuple[str, ...], int | None]]:
    """query -> (gold, cross-validated rank of its first gold task) of every in-scope case; from
    the bench's memo where an earlier preview ranked the same tasks and cases with the same fit,
    embeddings and live state (the catalog as it is: the before side of every preview until
    the next publish)."""
    if bench.memo is None:
        return _cv_ranks_now(bench, tasks, cases, params)
    key = ("cv", tuple(t for t in tasks if t.active), tuple(cases), id(params), bench.embedder is not None,
           id(bench.live))
    anchors = (params, bench.live)
    return bench.memo.get_or_make(key, anchors, lambda: _cv_ranks_now(bench, tasks, cases, params))


def _cv_ranks_now(bench: _Workbench, tasks, cases, params: RankerParams) -> dict[str, tuple[tuple[str, ...], int | None]]:
    out = {}
    for fit, held in cv_folds(list(cases), FOLDS, CV_SEED, bench.embedder):   # translations held out together
        held = [c for c in held if c.gold]
        if not held:
            continue
        held_out = frozenset(normalised_query(c.query) for c in held) if params.learned else frozenset()
        side = bench.index(tasks, fit, params, fitted_prototypes=False, held_out=held_out)
        for case in held:
            out.setdefault(case.query, (tuple(case.gold), bench.cv_rank(side, case.query, case.gold)))
    return out


def _cv_hit(rank: int | None) -> bool:
    return rank is not None and rank <= TOP_K


def _figures(ranks: Mapping[str, tuple[tuple[str, ...], int | None]]) -> CVFigures:
    if not ranks:
        return CVFigures(0, None, None)
    values = [rank for _gold, rank in ranks.values()]
    return CVFigures(len(values), round(float(np.mean([_cv_hit(r) for r in values])), 4),
                     round(float(np.mean([1.0 / r if r else 0.0 for r in values])), 4))



# -- the whole impact --------------------------------------------------------------------------------
class ImpactMemo:
    """The last few reports, each under everything it depends on: the two sides' tasks and
    cases (by content), the queries, the viewer, and the very live state and after-fit it ranked
    with (held here, compared by identity: any reload, refit or publish is another state). A
    confirmation page shown again (a reload, a stale or malformed confirmation answered with the
    page) costs a look-up instead of a second preview (~1 s on the demo, ops/bench_preview.py).
    It also keeps each side's cross-validated ranks (_cv_ranks) and the live side's ranking of
    every test case (_Workbench.adopt), so the next preview against the same live catalog
    cross-validates and ranks only its after side."""

    def __init__(self, capacity: int = 16):
        self._entries: LRU[tuple] = LRU(capacity)

    def get(self, key: tuple, anchors: tuple):
        entry = self._entries.get(key)
        if entry is None or len(entry[0]) != len(anchors) or any(a is not b for a, b in zip(entry[0], anchors)):
            return None
        return entry[1]

    def put(self, key: tuple, anchors: tuple, value) -> None:
        self._entries.put(key, (anchors, value))

    def get_or_make(self, key: tuple, anchors: tuple, make: Callable[[], object]):
        """The value kept under `key` and `anchors`, else `make()`, kept there."""
        value = self.get(key, anchors)
        if value is None:
            value = make()
            self.put(key, anchors, value)
        return value


def change_impact(serving: Serving, before: Side, after: Side, queries: Sequence[str], viewer: Viewer = PUBLIC,
                  memo: ImpactMemo | None = None) -> ImpactReport:
    """The impact of changing `before` (as served now: `serving.live`) into `after` (with the fit
    that will serve it once published); `queries`: the edited query or queries; `viewer`: whose
    rankings (see the module docstring). Embeddings that cannot be had make the whole report
    rank in the degraded (sparse) mode, as the service would. `memo`: an ImpactMemo to answer a
    report already made from (the same report object)."""
    started = time.perf_counter()
    before = replace(before, cases=_content(before.cases))
    after = replace(after, cases=_content(after.cases))
    if memo is None:
        return _impact_of(serving, before, after, queries, viewer, None, started)
    key = (tuple(before.tasks), tuple(before.cases), tuple(after.tasks), tuple(after.cases), tuple(queries), viewer,
           id(serving.live), id(after.params))
    anchors = (serving.live, after.params)
    report = memo.get(key, anchors)
    if report is None:
        report = _impact_of(serving, before, after, queries, viewer, memo, started)
        if report.mode == "full" or not serving.live.vectors_ok:   # never keep one that embeddings failing degraded
            memo.put(key, anchors, report)
    return report


def _impact_of(serving: Serving, before: Side, after: Side, queries: Sequence[str], viewer: Viewer,
               memo: ImpactMemo | None, started: float) -> ImpactReport:
    """The report itself (`before`, `after`: their cases as _content makes them; `memo`: for the
    cross-validated ranks of each side): in the full mode where the live state has its vectors,
    in the sparse mode where it has not or the embeddings fail now."""
    live = serving.live
    embedder = serving.embedder if live.vectors_ok else None
    try:
        bench = _Workbench(serving, embedder, viewer, memo)
        if embedder is not None and _content(live.cases) == before.cases and \
                live.index.tasks == tuple(t for t in before.tasks if t.active):
            bench.adopt(live.index, before.cases, live.params)
        return _report(bench, started, before, after, queries)
    except EmbeddingUnavailable:
        return _report(_Workbench(serving, None, viewer, memo), started, before, after, queries)


def _report(bench: _Workbench, started: float, then: Side, now: Side, queries) -> ImpactReport:
    """The report of changing `then` (as served) into `now` (as it will serve)."""
    before_tasks, before_cases, before_params = then.tasks, then.cases, then.params
    after_tasks, after_cases, after_params = now.tasks, now.cases, now.params
    before = bench.index(before_tasks, before_cases, before_params, fitted_prototypes=True)
    after = bench.index(after_tasks, after_cases, after_params, fitted_prototypes=True)
    gold_of = judged_gold(before_cases, after_cases)
    edited = [compare_query(bench, before, after, q, gold_of.get(q, _pinned_gold(after.index.lexicon, q)))
              for q in dict.fromkeys(q.strip() for q in queries if q and q.strip())]
    names = {t.id: t.name for t in [*before_tasks, *after_tasks]}
    one_side = set(before_cases) ^ set(after_cases)
    added, removed, recounted = lexicon_changes(before, after, one_side, names)
    cases = changed_cases(bench, before, after, before_cases, after_cases)
    prose = prose_words([c for c in after_cases if c not in set(before_cases)], after_cases)
    cv_before, cv_after, failing, passing = cross_validate(bench, then, now)
    mode = "full" if bench.embedder is not None and after.index.has_vectors else "sparse"
    return ImpactReport(
        queries=tuple(edited), links_added=tuple(added), links_removed=tuple(removed), links_changed=tuple(recounted),
        changed_cases=tuple(cases), cv_before=cv_before, cv_after=cv_after,
        newly_failing=tuple(failing), newly_passing=tuple(passing),
        mode=mode,
        ranker={"source": after_params.source, "fit_id": after_params.fit_id, "refit_follows": now.refit_s is not None,
                "refit_s": now.refit_s,
                "before": {"source": before_params.source, "fit_id": before_params.fit_id}},
        elapsed_ms=round((time.perf_counter() - started) * 1000.0, 1),
        view_as=bench.viewer.name,
        roles=tuple(sorted({r for t in [*before_tasks, *after_tasks] if t.active for r in t.roles})),
        hidden_gold=hidden_gold(before_tasks, after_tasks, edited, cases, bench.viewer),
        abstention=abstention_note(after_params, mode, bench.settings.abstain, before_cases, after_cases),
        prose_words=prose)


def prose_words(changed: Sequence[CaseRecord], cases: Sequence[CaseRecord]) -> tuple[str, ...]:
    """The words of the `changed` cases' rationales that their gold will not be linked by:
    rationale prose across `cases` (lexicon.rationale.prose_terms) absent from the case's query."""
    prose = prose_terms(cases, PROSE_MAX_DF)
    found: dict[str, None] = {}
    for case in changed:
        asked = {stem(w) for w in words(case.query)}
        for word in words(case.rationale):
            if case.gold and stem(word) in prose and stem(word) not in asked:
                found.setdefault(word)
    return tuple(found)


def hidden_gold(before_tasks: Sequence[TaskRecord], after_tasks: Sequence[TaskRecord], edited: Sequence[QueryComparison],
                changed: Sequence[QueryComparison], viewer: Viewer) -> tuple[HiddenGold, ...]:
    """The gold tasks this change leaves hidden from `viewer` (active ones: a retired gold is
    flagged elsewhere), each with the queries naming it: the gold of the edited queries, and a
    gold the change itself hides (a task given a role, or new and restricted) of any changed
    case. A restricted task the change leaves as it was is not this change's news: a Dental Exam
    alias edit says nothing about Background Checks (issue 44 item 5)."""
    roles, restrict = viewer.visible()
    if not restrict:
        return ()
    was_visible = {t.id for t in before_tasks if t.active and t.visible_to(roles)}
    by_id = {t.id: t for t in after_tasks if t.active}
    existed = {t.id for t in before_tasks if t.active}
    hidden = {task_id for task_id, task in by_id.items() if not task.visible_to(roles)}
    newly_hidden = {task_id for task_id in hidden if task_id in was_visible or task_id not in existed}
    naming: dict[str, list[str]] = {}
    for comparison in edited:
        for task_id in comparison.gold:
            if task_id in hidden:
                naming.setdefault(task_id, []).append(comparison.query)
    for comparison in changed:
        for task_id in comparison.gold:
            if task_id in newly_hidden:
                naming.setdefault(task_id, []).append(comparison.query)
    return tuple(HiddenGold(t, by_id[t].name, tuple(by_id[t].roles), tuple(dict.fromkeys(q)))
                 for t, q in sorted(naming.items()))


def abstention_note(params: RankerParams, mode: str, enabled: bool, before_cases: Sequence[CaseRecord],
                    after_cases: Sequence[CaseRecord]) -> AbstentionNote:
    model = params.abstention_for(mode)
    negatives = (model.cv.get("n_negatives") or {}) if model is not None else {}
    fitted = negatives.get("case", 0) if model is not None else None
    return AbstentionNote(model is not None, int(fitted) if fitted is not None else None,
                          sum(1 for c in before_cases if not c.gold), sum(1 for c in after_cases if not c.gold),
                          enabled, model.cv.get("kind") if model is not None else None,
                          sum(int(n) for source, n in negatives.items() if source != "case"))


def _content(cases: Sequence[CaseRecord]) -> list[CaseRecord]:
    """The cases without their store id and version: two lists holding the same test cases
    compare equal however they were read (the indexes are shared on that equality)."""
    return [replace(c, id=None, version=None) for c in cases]


def _pinned_gold(lexicon: RationaleLexicon, query: str) -> tuple[str, ...]:
    """The gold of an edited query that is no case's query verbatim but shares its pin key."""
    return tuple(lexicon.pins.get(pin_key(query), ()))
