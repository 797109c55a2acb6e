"""The deterministic hybrid prefilter, as a pure function.

    score(q, t) = sum_f w_f * x_f(q, t)

over eight signals x_f: four sparse ones, coverage-normalised to [0, ~1] (each speaks only as
loudly as its evidence),

    lexical    BM25F over the task's name, aliases, category, help (and enrichment)
    rationale  the rationale lexicon of Eq. 1 (term -> task links from test cases)
    typo       lexical + rationale evidence of typo-corrected query words
    exemplar   BM25 over one document per task: name, aliases, help and its test-case queries

and three dense ones, raw cosines of the query's embedding (absolute, comparable between
queries; no per-query stretching):

    embedding  to the task's text (name, aliases, category, help) embedded as a passage
    centroid   to the mean of the task's exemplars (case queries, name, aliases) as queries
    neighbour  to the task's nearest exemplar
    prototype  the logit of a softmax regression over the exemplars (search.prototypes;
               only once a per-catalog fit has made one)

The weights w_f come from a per-catalog fit (search.fitting: a conditional-logit model fitted
by cross-validation on the catalog's own test cases) or from the shipped defaults, with one
set for the full mode and one for the degraded mode without embeddings (never a rescaled
version of the other). `probability` is softmax(score) over the visible tasks.

What the query means (its words, corrections, plan, typing reading) is search.query's, below
the signals; what each signal is, search/signal/'s. This module computes the signals' values
over the visible tasks (`score_query`), fuses and ranks them (`rank_scored`, `rank_values`) and
says which words matched where (`explain_rows`).
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field, replace
from typing import Callable, Collection, Sequence

import numpy as np

from catalog.records import TaskRecord
from lexicon.frequency import common
from lexicon.language import CATALOG_LANGUAGE, foreign
from lexicon.text import normalise, stem
from search.index import SearchIndex
from search.learned import anonymous_bounded
from search.query import AnalysedQuery, QueryPlan, analyse_query, plan_query, query_coverage
from search.signal import FAMILIES, REGISTRY, QueryContext, named
from search.signal import exemplar as exemplar_signal, lexical as lexical_signal, rationale as rationale_signal
from search.signal import typo as typo_signal
from search.signals import softmax
from settings import Weights

# The signals by family, from their registry (search/signal/: one module per signal).
SPARSE_SIGNALS = named("sparse")     # lexical, rationale, typo, exemplar
DENSE_SIGNALS = named("dense")       # embedding, centroid, neighbour, prototype
SIGNALS = SPARSE_SIGNALS + DENSE_SIGNALS
#: Evidence learned from use (search.learned): a signal only where the index has learned
#: exemplars and vectors, so that without traffic nothing (not even the response) changes.
LEARNED = "learned"
#: Prefix evidence of a query still being typed (search.typed): a signal only where the query is
#: read as unfinished (AnalysedQuery.unfinished), weighed by the typing weights alone
#: (RankerParams.weights_for), so a whole query ranks as if it did not exist.
TYPING_SIGNALS = named("typing")     # typed, begins
TYPED, BEGINS = TYPING_SIGNALS
FUSED = SIGNALS + TYPING_SIGNALS + named("learned")
assert named("learned") == (LEARNED,)

# Evidence that is no ranking signal (never fused, never in contributions), kept beside the
# signal values for the abstention model (search.confidence): per task arrays, read at the top
# answer's row (PrefilterResult.evidence). `coverage` (any mode) is a property of the query
# (search.query.query_coverage); the rest each signal declares with what it informs
# (Signal.evidence: the neighbour's `typical`, each task's exemplar geometry).
QUERY_EVIDENCE = ("coverage",)
EVIDENCE = QUERY_EVIDENCE + tuple(e.name for s in REGISTRY for e in s.evidence)
# Whether a value (signal or evidence) exists without embeddings: what Scored.for_mode("sparse") keeps.
_SPARSE_VALUES = frozenset(QUERY_EVIDENCE).union(
    *({s.name, *(e.name for e in s.evidence)} for s in REGISTRY if s.family in ("sparse", "typing")))
# Where some learned evidence counts on anonymous networks alone (search.learned: a voice is a
# verified person), each value as the trusted evidence alone gives it (the written cases and what
# verified people taught) sits beside the served one under this prefix: "trusted:learned", and,
# where anonymous pairs joined the cases, every signal and evidence of the index's `trusted`
# counterpart. `bound_anonymous` reads them; they are never fused themselves, never shown.
TRUSTED = "trusted:"
# Where cases learned from use joined the index: the nearest-exemplar cosine over the written
# cases' exemplars only, from the same products (neighbour_signals), for written_values.
WRITTEN_NEIGHBOUR = "neighbour_written"
TEXT_FIELDS = ("name", "aliases", "category", "help", "enriched")


@dataclass(frozen=True)
class _Columns:
    """The rounded signal values and contributions of one ranking's returned tasks, row by row
    (`_rank_values`), from which each ScoredTask builds its two dicts when they are first read."""

    names: list[str]                  # the signals with values, in FUSED order
    shown: tuple[str, ...]            # the signals a result lists (None where a name has no value)
    parts: list[str]                  # the contributions' names (learned_attribution may add some)
    signals: list[float]              # len(names) per row
    contributions: list[float]        # len(parts) per row
    every: bool                       # names == shown: each shown signal is available (the usual case)

    def signals_at(self, j: int) -> dict[str, float | None]:
        width = len(self.names)
        values = self.signals[j * width:(j + 1) * width]
        if self.every:
            return dict(zip(self.names, values))
        column = dict(zip(self.names, values))
        return {name: column.get(name) for name in self.shown}

    def contributions_at(self, j: int) -> dict[str, float]:
        width = len(self.parts)
        return dict(zip(self.parts, self.contributions[j * width:(j + 1) * width]))


class ScoredTask:
    """One ranked task. `signals`: each signal's raw value for this task (None: unavailable);
    `contributions`: w_f * (x_f - mean over visible tasks), what each signal added (they sum to
    `score`, the fused score relative to the average visible task); `matched`: which query
    words matched where, for explanations; `pinned`: placed first by a test case with this exact
    query; `probability`: the softmax of the fused score over the visible tasks.

    The two dicts are built on first read from the ranking's rows (_Columns): a fit or a
    preview's cross-validation ranks thousands of queries 50 deep and reads neither, and building
    them for every position was an eighth of a demo fit."""

    __slots__ = ("task", "score", "matched", "pinned", "probability", "_columns", "_row", "_signals",
                 "_contributions")

    def __init__(self, task: TaskRecord, score: float, columns: _Columns, row: int, matched: list[dict],
                 pinned: bool = False, probability: float = 0.0):
        self.task, self.score, self.matched, self.pinned, self.probability = task, score, matched, pinned, probability
        self._columns, self._row = columns, row
        self._signals = self._contributions = None

    @property
    def signals(self) -> dict[str, float | None]:
        if self._signals is None:
            self._signals = self._columns.signals_at(self._row)
        return self._signals

    @property
    def contributions(self) -> dict[str, float]:
        if self._contributions is None:
            self._contributions = self._columns.contributions_at(self._row)
        return self._contributions

    def __repr__(self) -> str:
        return f"ScoredTask({self.task.id!r}, score={self.score}, pinned={self.pinned})"


@dataclass(frozen=True)
class PrefilterResult:
    ranked: list[ScoredTask]          # best first, length <= k
    corrections: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    effective_weights: dict[str, float] = field(default_factory=dict)
    mode: str = "full"                # "full" or "sparse" (embeddings unavailable)
    out_of_scope_similarity: float | None = None   # cosine to the nearest out-of-scope case
    evidence: dict[str, float] = field(default_factory=dict)  # EVIDENCE at the top answer


def mode_of(values: dict[str, np.ndarray]) -> str:
    """"full" when the dense signals were computed, else "sparse" (the degraded mode)."""
    return "full" if "embedding" in values else "sparse"


def explanation_targets(index: SearchIndex, query_words: list[str], corrections,
                        language: str = CATALOG_LANGUAGE, fragment: str | None = None) -> list[tuple]:
    """Per query word, in order, what it may have matched: (word, surface word, similarity or
    None, term, column) for the word itself and each of its typo corrections, when the term is
    a vocabulary column. Resolved once per query, for every explained result.

    Only a correction that explains a misspelling is a target (is_misspelling_of), only one
    into a word the tasks' own texts are written with or a common word (lexicon.frequency):
    never into a test case's typo ("dev" read as "developement"), and only the first (closest)
    correction of a word to each term: "screning" read as "screening" and as "screenings" is one
    reading of one term, said once. `fragment`: the last word while it is still being typed
    (it begins words of the catalog: `fragment_readings` says which, per result), so none of
    its corrections is a target: a half-typed word is not a misspelled finished one ("backg" is
    not "back", "med" not "medicaid"). The ranking is not this function's: the typo signal reads
    `corrections` as they are (plan_query). `language`: the query's (AnalysedQuery.language); a
    word of another language than the catalog's is its own stem there."""
    targets = []
    other = foreign(language)
    for word in query_words:
        own = index.vocabulary.get(stem(word, language) if other else index.surface_to_term.get(word, stem(word)))
        read: set[str] = set()
        readings = [(word, None)] if word == fragment else [(word, None)] + list(corrections.get(word, []))
        for surface_word, similarity in readings:
            term = stem(surface_word, language) if other and similarity is None else \
                index.surface_to_term.get(surface_word, stem(surface_word))
            column = index.vocabulary.get(term)
            if column is None:
                continue
            if similarity is not None and (term in read or not is_misspelling_of(index, own, column)
                                           or not readable(index, surface_word)):
                continue
            read.add(term)
            targets.append((word, surface_word, similarity, term, column))
    return targets


def readable(index: SearchIndex, word: str) -> bool:
    """Whether a why line may say a word was read as `word`: a word of the tasks' own texts, or
    a common word of a supported language ("shots", which only the test cases use). Not a test
    case's deliberate typo ("developement", "attendence")."""
    return word in index.text_words or common(word)


def is_misspelling_of(index: SearchIndex, own: int | None, correction: int) -> bool:
    """Whether a typed word (its term column `own`, None when the catalog does not know it)
    may be explained as a misspelling of the term at `correction`: when the catalog does not
    know the word, or knows it less than the correction (fewer task postings over task text,
    rationale lexicon and exemplar documents: SearchIndex.term_support).

    Test-case queries deliberately contain misspellings ("devlopmental", "screning"), so a
    correctly spelled word that only the test cases use ("developmental") is corrected towards
    them too (typo_corrections): explaining that as 'reads "developmental" as "devlopmental"'
    would call the person's right spelling a typo. The better-known word is the right one."""
    if own is None:
        return True
    if own == correction or index.term_support is None:
        return False
    return float(index.term_support[correction]) > float(index.term_support[own])


def typed_fragment(index: SearchIndex, analysed: AnalysedQuery) -> str | None:
    """The last query word when it is still being typed (no space after it: the prefilter reads
    it as a prefix too, AnalysedQuery.prefix) and begins a word of the tasks' own texts (longer
    than it): what the why line says "begins" a word instead of reading it as another finished
    word. None after a space, for a word that begins none, and for a whole word of the tasks'
    texts ("check" is said to match "Checks", not to begin it)."""
    if analysed.finished or not analysed.words or analysed.foreign:
        return None
    word = analysed.words[-1]
    if word in index.text_words:   # a whole word of the catalog ("check", "bus"): it matches as one
        return None
    surface = index.surface_words   # sorted: the words beginning with `word` are one slice
    start = bisect.bisect_right(surface, word)
    for w in surface[start:bisect.bisect_left(surface, word + "\uffff", start)]:
        if w in index.text_words:
            return word
    return None


_TEXT_WORD = re.compile(r"[^\W_]+(?:[-'][^\W_]+)*")


def fragment_readings(task: TaskRecord, fragment: str) -> dict[str, str | None]:
    """Per field of `task`'s own text where a word begins with `fragment`: the first such word
    as the task writes it, or None where the field has `fragment` as a whole word (it matches
    whole there). Name first."""
    found: dict[str, str | None] = {}
    for where, texts in (("name", (task.name,)), ("aliases", task.aliases),
                         ("category", ((task.category or "").replace("_", " "),)), ("help", (task.help,))):
        begun = [w for text in texts for w in _TEXT_WORD.findall(text or "") if normalise(w).startswith(fragment)]
        if any(normalise(w) == fragment for w in begun):
            found[where] = None
        elif begun:
            found[where] = begun[0]
    return found


def explain_rows(index: SearchIndex, rows: Sequence[int], query_words: list[str], corrections,
                 language: str = CATALOG_LANGUAGE, fragment: str | None = None) -> list[list[dict]]:
    """Per task row, which query words matched where (its text fields, the rationale lexicon),
    for explanations: [{"term", "field"[, "corrected_to", "similarity" | "begins"]}, ...]. A query
    in another language than the catalog's (`language`) matches no text field: the lexical signal
    abstains for it (search.signal.lexical), so a why line must not say it matched one.
    `fragment` (typed_fragment): the last word still being typed, said to begin the task's
    words where it does not match one whole ("dev" begins "Development")."""
    targets = explanation_targets(index, query_words, corrections, language, fragment)
    text_fields = () if foreign(language) else TEXT_FIELDS
    rationale = index.rationale
    linked = {column: frozenset(rationale.indices[rationale.indptr[column]:rationale.indptr[column + 1]].tolist())
              for column in {target[4] for target in targets}}   # the tasks each term's lexicon entry links
    out = []
    for row in rows:
        fields = index.field_terms[row]
        in_text = frozenset().union(*fields.values())   # one look-up for the usual miss
        matched = []
        for word, surface_word, similarity, term, column in targets:
            hits = [f for f in text_fields if term in fields.get(f, ())] if term in in_text else []
            if row in linked[column]:
                hits.append("rationale")
            for where in hits:
                entry = {"term": word, "field": where}
                if similarity is not None:
                    entry.update(corrected_to=surface_word, similarity=round(similarity, 3))
                matched.append(entry)
        if fragment is not None:   # "dev" begins "Development" (not: matches "dev", its stem's field)
            begun = fragment_readings(index.tasks[row], fragment)
            matched = [m for m in matched if not (m["term"] == fragment and begun.get(m["field"]))]
            matched.extend({"term": fragment, "field": where, "begins": word} for where, word in begun.items() if word)
        out.append(matched)
    return out


def sparse_signals(index: SearchIndex, plan: QueryPlan) -> dict[str, np.ndarray]:
    """Lexical, rationale, typo and exemplar scores of every task, coverage-normalised to [0, ~1]
    (each signal's `scores`, search/signal/): the written-cases counterfactual's sparse values."""
    context = QueryContext(index, None, None, None)
    context.plan = plan   # (a lazy attribute: set, not computed)
    return {module.SIGNAL.name: module.scores(index, plan, context.exact)
            for module in (lexical_signal, rationale_signal, typo_signal, exemplar_signal)}


def dense_signals(index: SearchIndex, rows: np.ndarray, query_vector: np.ndarray) -> dict[str, np.ndarray]:
    """Raw cosines of the query to each visible task's text, exemplar centroid and nearest
    exemplar, and the prototype logit (the dense signals of search/signal/), with the dense
    evidence beside them. A task without exemplars has centroid 0 and neighbour -1 (the fitted
    weights know this is "no evidence")."""
    return _family(QueryContext(index, None, rows, query_vector), "dense")


_BY_FAMILY = {family: tuple(s for s in REGISTRY if s.family == family) for family in FAMILIES}


def _family(context: QueryContext, family: str, skip: frozenset[str] = frozenset()) -> dict[str, np.ndarray]:
    """The values of the registered signals of `family` (None: unavailable, left out), then the
    evidence those with a value declare (Signal.evidence; for the dense family, the written
    cases' nearest-exemplar cosines first, WRITTEN_NEIGHBOUR, where cases learned from use
    joined the index)."""
    values = {}
    for signal in _BY_FAMILY[family]:
        if signal.name not in skip:
            value = signal.value(context)
            if value is not None:
                values[signal.name] = value
    if family == "dense" and "neighbour" in values and context.neighbours[1] is not None:
        values[WRITTEN_NEIGHBOUR] = context.neighbours[1]
    for signal in _BY_FAMILY[family]:
        if signal.name in values:
            for evidence in signal.evidence:
                value = evidence.value(context)
                if value is not None:
                    values[evidence.name] = value
    return values


def signal_values(index: SearchIndex, analysed: AnalysedQuery, rows: np.ndarray,
                  query_vector: np.ndarray | None, defer: frozenset[str] = frozenset(),
                  neighbours: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Each available signal's value for the tasks in `rows` (search/signal/, family by family:
    sparse always, typing for a query still being typed, dense and learned with vectors), and
    the abstention evidence beside them (EVIDENCE). The signals in `defer`
    (DEFERRABLE ones) are left out: `deferred_signals` gives them at the ranked rows only.
    `neighbours`: the nearest-exemplar cosines at `rows` where the caller has them already
    (`trusted_values`), instead of reading the exemplars again."""
    context = QueryContext(index, analysed, rows, query_vector)
    if neighbours is not None:
        context.__dict__["neighbours"] = (neighbours, None)
    values = _family(context, "sparse")
    values["coverage"] = np.full(rows.size, query_coverage(index, analysed), dtype=np.float32)
    if analysed.unfinished and index.typed is not None:
        values.update(_family(context, "typing"))
    if query_vector is not None and index.has_vectors:
        values.update(_family(context, "dense"))
        values.update(_family(context, "learned", defer))
    values.update(trusted_values(context, defer, values))
    return values


def trusted_values(context: QueryContext, defer: frozenset[str], served: dict[str, np.ndarray]
                   ) -> dict[str, np.ndarray]:
    """The values the trusted evidence alone gives (TRUSTED), where the index holds learned
    evidence that anonymous networks alone stand behind: with anonymous pairs among its cases,
    the whole query scored again by `index.trusted` (the cases without them); for a signal whose
    evidence that index does not hold (Signal.trusted: the `learned` signal over the verified
    exemplars alone, the trusted index holding no learned memory of its own), the signal's own
    reading. Empty otherwise (the usual case: nothing to bound)."""
    index, analysed = context.index, context.analysed
    found: dict[str, np.ndarray] = {}
    if index.trusted is not None:
        trusted = index.trusted   # the same reading of the query; its prefix in that index's vocabulary
        prefix = trusted.prefix_expansion(analysed.words[-1]) if analysed.prefix and analysed.words else {}
        again = signal_values(trusted, replace(analysed, prefix=prefix), context.rows, context.query_vector, defer,
                              written_neighbours(index, served))
        found = {TRUSTED + name: v for name, v in again.items() if name != WRITTEN_NEIGHBOUR}
    for signal in REGISTRY:
        if signal.trusted is not None and signal.name in served:
            value = signal.trusted(context)
            if value is not None:
                found[TRUSTED + signal.name] = value
    return found


#: Signals the prefilter computes only at the tasks it returns when their weight is 0 (those
#: that declare how: Signal.deferred): they cannot move the ranking then, and only the returned
#: tasks show them (and the abstention model reads only the top one). The learned signal is the
#: one worth it: its weight is often 0 once learned exemplars are cases too, and it reads every
#: learned exemplar's vector.
DEFERRABLE = tuple(s.name for s in REGISTRY if s.deferred is not None)


def deferred_signals(index: SearchIndex, rows: np.ndarray, query_vector: np.ndarray | None,
                     names: frozenset[str]) -> dict[str, Callable[[list[int]], np.ndarray]]:
    """Of the DEFERRABLE signals in `names`, those available for `rows` (as signal_values would
    have them: with vectors), each as a function of positions in `rows` returning its values
    there: the values signal_values gives at those positions."""
    found = {}
    if query_vector is None or not index.has_vectors:
        return found
    context = QueryContext(index, None, rows, query_vector)
    for signal in REGISTRY:
        if signal.name in names and signal.deferred is not None:
            at = signal.deferred(context)
            if at is not None:
                found[signal.name] = at
    return found


def deferrable(weights, mode: str) -> frozenset[str]:
    """The DEFERRABLE signals whose weight in `mode` is 0."""
    mode_weights = weights.for_mode(mode) if hasattr(weights, "for_mode") else weights
    return frozenset(name for name in DEFERRABLE if not float(getattr(mode_weights, name)))


def written_neighbours(index: SearchIndex, served: dict[str, np.ndarray]) -> np.ndarray | None:
    """The trusted index's nearest-exemplar cosines from the served products, where its
    exemplars are exactly the served index's written ones (no verified learned case): the
    WRITTEN_NEIGHBOUR values, and at the tasks the served cascade did not reach the lowest of
    them (what the cascade gives such tasks: neighbour_signals). None otherwise: the trusted
    pass reads its own exemplars. Saves that pass most of its cost (docs/results.md, latency)."""
    written = served.get(WRITTEN_NEIGHBOUR)
    mask = index.exemplars.written
    if written is None or mask is None or len(index.trusted.exemplars.texts) != int(np.count_nonzero(mask)):
        return None
    reached = ~np.isnan(written)
    if not reached.any():
        return None
    return np.where(reached, written, written[reached].min()).astype(np.float32)


def bound_anonymous(values: dict[str, np.ndarray], weights: Weights) -> dict[str, np.ndarray]:
    """`values` with the evidence anonymous networks alone stand behind kept inside the trusted
    evidence's top window only (search.learned.anonymous_window), and the TRUSTED values
    dropped; `values` itself when it has none (nothing to bound). With x_f the served values and
    x'_f the trusted ones (TRUSTED), s' = sum_f w_f x'_f and W the ANONYMOUS_WINDOW best tasks
    by s',

        x''_f(t) = x_f(t)  if t in W,  else x'_f(t)

    so below the window every task is scored, and ordered, exactly as the trusted evidence
    alone would (search.learned.anonymous_bounded: the bound and why)."""
    trusted = {name[len(TRUSTED):]: v for name, v in values.items() if name.startswith(TRUSTED)}
    if not trusted:
        return values
    served = {name: v for name, v in values.items() if not name.startswith(TRUSTED)}
    if not any(float(getattr(weights, name, 0.0)) for name in trusted if name in FUSED):
        return served
    trusted_scores, _ = fuse({**served, **trusted}, weights)
    for name, value in trusted.items():
        if name in served:
            served[name] = anonymous_bounded(served[name], value, trusted_scores)
    return served


def fuse(values: dict[str, np.ndarray], weights: Weights) -> tuple[np.ndarray, dict[str, float]]:
    """score = sum_f w_f * x_f over the available signals (an unavailable one adds nothing;
    the caller picks the weights fitted for that mode), the `learned` signal's anonymous
    evidence bounded first (`bound_anonymous`)."""
    values = bound_anonymous(values, weights)
    used = {name: float(getattr(weights, name)) for name in FUSED if name in values}
    size = len(next(iter(values.values()))) if values else 0
    fused = np.zeros(size, dtype=np.float64)
    for name, weight in used.items():
        if weight:
            fused += weight * values[name]
    return fused, {name: used.get(name, 0.0) for name in SIGNALS} | {
        name: used[name] for name in (*TYPING_SIGNALS, LEARNED) if name in used}


def rank_order(tasks: Sequence[TaskRecord], fused: np.ndarray, pinned: tuple[str, ...], k: int,
               also: Collection[str] = ()) -> list[int]:
    """Positions of the top `k`: pinned tasks first (in the test case's gold order), then by
    score, then by name, so equal scores never flap between requests. Only the candidates that
    can reach the top `k` (scores at or above the k-th best) are sorted. `also`: task ids ranked
    wherever they fall, after the top k by score (the tasks on screen: search.sequence)."""
    order = _top_order(tasks, fused, pinned, k)
    missing = set(also).difference(tasks[i].id for i in order)   # usually none: the screen is near the top
    if missing:
        extra = [i for i, task in enumerate(tasks) if task.id in missing]
        order += sorted(extra, key=lambda i: (-fused[i], tasks[i].name))
    return order


def _top_order(tasks: Sequence[TaskRecord], fused: np.ndarray, pinned: tuple[str, ...], k: int) -> list[int]:
    if len(tasks) > k:
        kth = np.partition(fused, len(fused) - k)[len(fused) - k]
        candidates = np.flatnonzero(fused >= kth)
    else:
        candidates = np.arange(len(tasks))
    if not pinned:   # the usual case: by score alone, unless two candidates tie (then by name below)
        order = candidates[np.argsort(-fused[candidates], kind="stable")]
        if order.size < 2 or np.all(np.diff(fused[order]) != 0):
            return order[:k].tolist()
    pins = {task_id: rank for rank, task_id in enumerate(pinned)}
    candidates = candidates.tolist()
    if pins and len(tasks) > k:
        candidates += [i for i, task in enumerate(tasks) if task.id in pins]
    key = lambda i: (pins.get(tasks[i].id, len(pins)), -fused[i], tasks[i].name)  # noqa: E731
    return sorted(set(candidates), key=key)[:k]


def fused_ranking(tasks: Sequence[TaskRecord], values: dict[str, np.ndarray], weights, k: int,
                  pinned: tuple[str, ...] = (), also: Collection[str] = ()):
    """(the values as ranked, the fused scores, the weights fused with, the positions of the top
    `k`): the weights of the values' mode (`weights.for_mode`, where it has modes), the learned
    signal's anonymous evidence bounded (bound_anonymous), fused, ranked (rank_order). What
    every ranking of signal values shares: rank_values builds each position's result from it,
    rank_ids reads only the order."""
    mode_weights = weights.for_mode(mode_of(values)) if hasattr(weights, "for_mode") else weights
    values = bound_anonymous(values, mode_weights)   # what every task shows is what ranked it
    fused, fused_weights = fuse(values, mode_weights)
    return values, fused, fused_weights, rank_order(tasks, fused, pinned, k, also)


def rank_ids(tasks: Sequence[TaskRecord], values: dict[str, np.ndarray], weights, k: int,
             pinned: tuple[str, ...] = ()) -> list[str]:
    """The ids rank_values ranks, best first, without building each position's result (its
    rounded signal values, contributions and probability): what a fit's cross-validated
    Hit@K and MRR read (search.fitting.metrics.ranked_ids), a sixth of a demo fit when they
    were read off whole results."""
    order = fused_ranking(tasks, values, weights, k, pinned)[3]
    return [tasks[i].id for i in order]


def rank_values(tasks: Sequence[TaskRecord], values: dict[str, np.ndarray], weights, k: int,
                pinned: tuple[str, ...] = (), out_of_scope_similarity: float | None = None,
                corrections: dict | None = None) -> PrefilterResult:
    """Fuse the signal values of `tasks` and return the top `k` (without word-level
    explanations): the part of the prefilter that the fitting and the evaluation replay."""
    return _rank_values(tasks, values, weights, k, (pinned, out_of_scope_similarity, corrections))


@dataclass(frozen=True)
class Extras:
    """What rank_scored adds to a plain fusion (_rank_values): `deferred` signals
    (deferred_signals: weight 0, computed at the ranked positions only; each contributes exactly
    0), `explain` (ranked positions -> the `matched` list of each) and `attribute` (ranked
    positions -> the written-cases-only signal values there, written_values:
    contributions.learned, learned_attribution)."""

    deferred: dict = field(default_factory=dict)
    explain: Callable | None = None
    attribute: Callable | None = None


def _rank_values(tasks, values, weights, k, about: tuple, extras: Extras = Extras(),
                 also: Collection[str] = ()) -> PrefilterResult:
    """rank_values, with its `extras` (Extras). `about`: (pinned, out-of-scope similarity,
    corrections) of the query. The returned tasks' signal values and contributions are computed
    as one (signals x k) array, rounded at once (round_like_python)."""
    pinned, out_of_scope_similarity, corrections = about
    deferred, explain, attribute = extras.deferred, extras.explain, extras.attribute
    mode = mode_of(values)
    values, fused, fused_weights, order = fused_ranking(tasks, values, weights, k, pinned, also)
    for name in deferred:
        fused_weights[name] = 0.0
    probabilities = softmax(fused)
    names = [name for name in FUSED if name in values or name in deferred]
    width = len(names)
    shown = SIGNALS + tuple(name for name in (*TYPING_SIGNALS, LEARNED) if name in names)
    positions = np.asarray(order, dtype=np.int64)
    at = np.array([values[name][positions] if name in values else deferred[name](positions) for name in names],
                  dtype=np.float64).reshape(width, len(order))
    means = np.array([signal_mean(values[name]) if name in values else 0.0 for name in names])
    scale = np.array([fused_weights[name] if name in values else 0.0 for name in names])
    terms = scale[:, None] * (at - means[:, None])
    parts = names
    if attribute is not None and order:   # learned_attribution: what use added, split out of each signal
        terms, parts = learned_attribution(names, terms, at, scale, attribute(positions))
    cw = len(parts)
    contributions = round_like_python(terms.T.ravel())
    columns = _Columns(names, shown, parts, round_like_python(at.T.ravel()), contributions, names == list(shown))
    chance = probabilities[positions].tolist()
    matched = explain(order) if explain is not None else [[] for _ in order]
    ranked = [ScoredTask(tasks[i], round(sum(contributions[j * cw:(j + 1) * cw]), 4), columns, j, matched[j],
                         tasks[i].id in pinned, chance[j])
              for j, i in enumerate(order)]
    evidence = ({name: float(values[name][order[0]]) for name in EVIDENCE if name in values}
                if order else {})
    return PrefilterResult(ranked, corrections or {}, fused_weights, mode, out_of_scope_similarity, evidence)


def signal_mean(values: np.ndarray) -> float:
    """float(values.mean()), without the generic reduction's overhead: numpy's mean is the
    pairwise sum in the array's dtype, divided by the count in float64, cast back to the dtype."""
    return float(values.dtype.type(float(np.add.reduce(values)) / values.size))


# Beyond this magnitude (and for nan, inf) round_like_python defers to Python's round: below it,
# x * 10**4 is computed within 1e-6 of its exact value, so its rounding is decided exactly.
ROUND_FAST_LIMIT = 1e5


def round_like_python(values: np.ndarray, digits: int = 4) -> list[float]:
    """[round(float(x), digits) for x in values], the same floats, at numpy's speed.

    Python rounds the exact binary value of x to `digits` decimals, half to even, and returns
    the double nearest that decimal. Here k = rint(x * 10^d) (half to even), then k / 10^d:
    an exact integer divided by an exact power of ten is correctly rounded, so it is that same
    double whenever k is right, i.e. unless x * 10^d lies within the product's rounding error
    (< 1e-6 below ROUND_FAST_LIMIT) of a half-integer: those few (and nan, inf, huge values)
    take Python's own round."""
    scale = 10.0 ** digits
    fast = np.abs(values) < ROUND_FAST_LIMIT                   # False for nan and inf too
    scaled = np.where(fast, values, 0.0) * scale
    fast &= np.abs(scaled - np.floor(scaled) - 0.5) >= 1e-6
    out = (np.rint(scaled) / scale).tolist()
    for i in np.flatnonzero(~fast).tolist():
        out[i] = round(float(values[i]), digits)
    return out


def written_values(index: SearchIndex, analysed: AnalysedQuery, rows: np.ndarray, query_vector: np.ndarray | None,
                   neighbour: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The signal values of the tasks in `rows` had the cases learned from use never joined the
    index: the same query (and query vector) against `index.written`, the catalog indexed from
    the written cases alone. Only the returned rows are scored densely (a few dot products); the
    `embedding` signal reads the task texts alone, the same in both indexes, so it is not redone.
    `neighbour`: the written cases' nearest-exemplar cosines at `rows` where the served
    products gave them already (WRITTEN_NEIGHBOUR; NaN where not): the written memory's
    exemplars are the served memory's written ones, so only the rest are read again. The query
    is read again in that index's vocabulary, with the typo tolerance it was read with."""
    written = index.written
    again = analyse_query(written, analysed.text, analysed.typo_min_similarity, prefix_search=bool(analysed.prefix))
    plan = plan_query(written, again.words, again.corrections, again.prefix, again.language)
    values = {name: scores[rows] for name, scores in sparse_signals(written, plan).items()}
    if query_vector is not None and written.has_vectors:
        memory = written.exemplars
        values["centroid"] = memory.centroids[rows] @ query_vector
        known = np.full(rows.size, np.nan, dtype=np.float32) if neighbour is None else neighbour.copy()
        missing = np.isnan(known)
        if missing.any():
            known[missing] = memory.neighbour(query_vector, rows[missing])[rows[missing]]
        values["neighbour"] = known
        if written.prototypes is not None:
            values["prototype"] = written.prototypes[rows] @ query_vector
    return values


def learned_attribution(names: list[str], terms: np.ndarray, at: np.ndarray, scale: np.ndarray,
                        written: dict[str, np.ndarray]) -> tuple[np.ndarray, list[str]]:
    """Split off what use added to each returned task's score, when cases learned from use
    joined the index (search.learned.learned_cases). With x_f the signal values of the index as
    served and x'_f those of the written cases alone (written_values), both at the task,

        contributions[f]       = w_f · (x'_f − mean_f)                f in SIGNALS
        contributions.learned  = w_L · (x_L − mean_L) + sum_f w_f · (x_f − x'_f)

    (mean_f over the visible tasks as served; L the `learned` signal, where weighed), so the
    contributions still add up to the score, and every returned task says how much use moved
    it (0 where use left its evidence unchanged; a task passed by another that use lifted shows
    the other's gain, not its own). `terms` (names x tasks): w_f · (x_f − mean_f); `at`: x_f;
    `written`: x'_f at the same tasks. Returns (terms, their names), `learned` last if new."""
    moved = np.zeros_like(terms)
    for c, name in enumerate(names):
        if name != LEARNED and name in written:
            moved[c] = scale[c] * (at[c] - written[name])
    terms = terms - moved
    gained = moved.sum(axis=0)
    if LEARNED in names:
        terms[names.index(LEARNED)] += gained
        return terms, names
    return np.vstack([terms, gained]), [*names, LEARNED]


def sparse_values(values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The values a query has without embeddings: the sparse and typing signals, the evidence
    they declare and the query's (and their TRUSTED counterparts), as the degraded mode scores it."""
    def sparse(name: str) -> bool:
        return (name[len(TRUSTED):] if name.startswith(TRUSTED) else name) in _SPARSE_VALUES
    return {name: v for name, v in values.items() if sparse(name)}


@dataclass(frozen=True)
class Scored:
    """A query's signal values over the tasks one viewer may see: all that fusing needs,
    computed once (an evaluation re-fuses it with each configuration's weights)."""

    analysed: AnalysedQuery
    query_vector: np.ndarray | None
    rows: np.ndarray                      # the visible tasks' rows in the index
    tasks: tuple[TaskRecord, ...]         # those tasks
    values: dict[str, np.ndarray]         # signal (and evidence) values at `rows` (signal_values)
    pinned: tuple[str, ...] = ()          # gold of a test case with this exact query
    out_of_scope_similarity: float | None = None   # cosine to the nearest out-of-scope case (full mode)
    deferred: frozenset[str] = frozenset()         # DEFERRABLE signals left out (weight 0)

    def for_mode(self, mode: str) -> "Scored":
        """As scored without embeddings ("sparse": the dense values and the out-of-scope
        similarity dropped), or unchanged ("full")."""
        if mode == "full" or mode_of(self.values) == "sparse":
            return self
        kept = sparse_values(self.values)
        return replace(self, values=kept, out_of_scope_similarity=None, deferred=frozenset())


def score_query(index: SearchIndex, analysed: AnalysedQuery, query_vector: np.ndarray | None, role=None,
                restrict_roles: bool = True, use_pins: bool = True, defer: frozenset[str] = frozenset()) -> Scored:
    """Every available signal's value over the tasks visible to `role` (signal_values), the
    pins of the exact query and the nearest out-of-scope case. `defer`: DEFERRABLE signals to
    leave out (their weight is 0: rank_scored computes them at the returned tasks only)."""
    rows, visible = index.visible(role, restrict_roles)
    if rows.size == 0:
        return Scored(analysed, query_vector, rows, visible, {})
    full = query_vector is not None and index.has_vectors   # as mode_of the values will say
    defer = defer if full else frozenset()
    values = signal_values(index, analysed, rows, query_vector, defer)
    pinned = index.lexicon.pinned_for(analysed.text) if use_pins else ()
    oos = index.exemplars.nearest_out_of_scope(query_vector) if mode_of(values) == "full" else None
    return Scored(analysed, query_vector, rows, visible, values, pinned, oos, defer)


def rank_scored(index: SearchIndex, scored: Scored, weights, k: int, *, explain: bool = True,
                also: Collection[str] = ()) -> PrefilterResult:
    """The top `k` of `scored` fused with `weights` (a `Weights`, or anything with
    `for_mode(mode) -> Weights`), its deferred signals computed at the returned tasks; with
    `explain`, which query words matched where and (where cases learned from use joined the
    index) what use added to each score (learned_attribution). `also`: task ids returned after
    the top k wherever they rank (rank_order)."""
    analysed, rows = scored.analysed, scored.rows
    if rows.size == 0:
        return PrefilterResult([], analysed.corrections, {})
    deferred = deferred_signals(index, rows, scored.query_vector, scored.deferred) if scored.deferred else {}
    if deferred:
        mode_weights = weights.for_mode("full") if hasattr(weights, "for_mode") else weights
        assert not any(float(getattr(mode_weights, name)) for name in deferred), "a deferred signal is weighed"
    attribute = explain_words = None
    if explain:
        fragment = typed_fragment(index, analysed)
        explain_words = lambda order: explain_rows(index, rows[order].tolist(), analysed.words,  # noqa: E731
                                                   analysed.corrections, analysed.language, fragment)
        if index.written is not None:   # cases learned from use joined this index: say what they did
            reached = scored.values.get(WRITTEN_NEIGHBOUR)

            def attribute(order: np.ndarray) -> dict[str, np.ndarray]:
                return written_values(index, analysed, rows[order], scored.query_vector,
                                      None if reached is None else reached[order])
    return _rank_values(scored.tasks, scored.values, weights, k,
                        (scored.pinned, scored.out_of_scope_similarity, analysed.corrections),
                        Extras(deferred, explain_words, attribute), also)


def prefilter(index: SearchIndex, query: str | AnalysedQuery, weights, k: int, role: str | None = None,
              restrict_roles: bool = True, query_vector: np.ndarray | None = None) -> PrefilterResult:
    """Rank every task visible to `role` and return the top `k` with per-signal explanations:
    score_query (with the exact query's pins), then rank_scored (search.pipeline.Pipeline runs
    the same two with a fit's weights, abstention and tail cut; call those for anything else).
    `query`: text (analysed with the default typo tolerance) or an AnalysedQuery;
    `query_vector` should embed its `embedding_text`. `weights` is a `Weights` or anything with
    `for_mode(mode) -> Weights` (search.ranker.FusionWeights)."""
    analysed = query if isinstance(query, AnalysedQuery) else analyse_query(index, query)
    scored = score_query(index, analysed, query_vector, role, restrict_roles, True, deferrable(weights, "full"))
    return rank_scored(index, scored, weights, k)
