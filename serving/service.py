"""SearchService: the I/O edge around the pure pipeline.

request (search.request.SearchRequest: `answer` builds it from an API call, `serve` takes one
built by the caller) -> the pipeline (search.pipeline: analyse, embed, score, fuse, abstain) ->
constrained re-rank (rerank/) -> validated results -> response dict.

It owns the live `SearchIndex` and the `RankerParams` it ranks with, rebuilding both in the
background when the store's revision moves (a catalog or test-case edit, or a new per-catalog
fit, noticed by the revision watcher thread of serving.watcher) while requests keep the old ones,
and talks to the embedder and the LLM, degrading instead of failing. When the test cases have
changed since the newest fit, it refits in a background thread (search.fitting) and stores the
result, which in turn moves the revision for every serving process.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Callable, Collection, NamedTuple, Protocol, Sequence

from catalog.records import CaseRecord, TaskRecord
from lexicon.language import page_language
from lexicon.text import printable, query_problem
from infra.metrics import Metrics
from rerank import Candidate, Reranker, select_examples
from serving.answer import Answer
from serving.answer_cache import AnswerCache
from search.confidence import in_hidden_shadow, shown, skip_rerank
from search.embeddings import CachedEmbedder, EmbeddingUnavailable
from search.fitting import cases_digest, fit_ranker, usable_learned
from search.learned import LearnedInputs, learned_digest, unclicked_digest
from search.index import Enrichment, SearchIndex
from search.assembly import IndexOptions, attach, serving_index
from search.pipeline import Pipeline, Ranked, make_pipeline, params_for
from search.prefilter import PrefilterResult
from search.signal import phrases
from search.ranker import RankerParams, default_params
from search.request import EVERYONE, SearchRequest, Viewer
from search.sequence import MAX_HELD
from search.suggestions import empty_state, suggest
from serving.watcher import RevisionWatcher
from settings import Settings

log = logging.getLogger(__name__)
PHRASES = phrases()          # signal -> the "why" line's phrase (search/signal/)
FIT_LEASE = "ranker-fit"   # one fit at a time across every worker and host sharing the database
FIT_LEASE_S = 1800         # a fit that dies holding it frees it after this long


class CatalogSource(Protocol):
    """What the service reads: CatalogStore satisfies it (so does an evaluation's temporary store)."""

    def revision(self) -> int: ...
    def tasks(self) -> list[TaskRecord]: ...
    def cases(self) -> list[CaseRecord]: ...
    def latest_fit(self): ...
    def fit_for_digest(self, digest: str): ...
    def save_fit(self, fitted_on_revision: int, digest: str, params: dict, report: dict) -> int: ...


class BadQuery(ValueError):
    """The request cannot be served as asked (HTTP 400)."""


@dataclass(frozen=True)
class LiveIndex:
    revision: int
    index: SearchIndex
    cases: tuple[CaseRecord, ...]
    roles: frozenset[str]
    vectors_ok: bool
    params: RankerParams
    digest: str                # of the tasks and cases the index was built from
    fit_stale: bool            # the newest fit was made on other cases (or there is none)

    @cached_property
    def out_of_scope(self) -> tuple[tuple[str, str], ...]:
        """(query, rationale) of every written out-of-scope case: what the no-answer suggestions
        may not contradict (search.suggestions.suggest), gathered once per live index."""
        return tuple((case.query, case.rationale) for case in self.cases if not case.gold)


class Request(NamedTuple):
    """One validated search request: what `_answer` ranks, and (without re-ranking) the key of
    the answer cache (a tuple of tuples: hashed and compared in C, as a cache hit needs).
    `search`: the query, its viewer (the roles whose restricted tasks it may show:
    visible_roles), its typing meaning and k (search.request.SearchRequest); `role`: the one role
    it narrowed to, if any; `rerank`: whether the LLM re-ranks the shortlist."""

    search: SearchRequest
    role: str | None
    rerank: bool


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000.0, 3)


def said_corrections(index, corrections: dict[str, list[tuple[str, float]]], role, restrict: bool
                     ) -> dict[str, list[tuple[str, float]]]:
    """The typo corrections a response may show this caller (its `corrections` and the spelling
    suggestion): those to words of tasks it may see (SearchIndex.visible_word). The ranking
    itself is unaffected: a restricted task is never ranked for this caller anyway."""
    said = {word: [(c, s) for c, s in found if index.visible_word(c, role, restrict)]
            for word, found in corrections.items()}
    return {word: found for word, found in said.items() if found}


class SearchService:
    def __init__(self, settings: Settings, source: CatalogSource, embedder: CachedEmbedder | None,
                 reranker: Reranker | None, metrics: Metrics,
                 enrichment: Callable[[Sequence[TaskRecord]], Enrichment] | None = None,
                 learned_evidence: Callable[[], LearnedInputs] | None = None):
        self.settings = settings
        # The fit's learned evidence, read at fit time only (never per request): exemplars, the
        # admin's blocked pairs and the unclicked queries (app.py wires analytics.learning.fit_inputs).
        self.learned_evidence = learned_evidence
        self.source = source
        self.embedder = embedder
        self.reranker = reranker
        self.metrics = metrics
        self.enrichment = enrichment
        self._live: LiveIndex | None = None
        self._answers: AnswerCache | None = None   # answers of `_live` (replaced with it)
        # Guards `_live` and `_refreshing` only; never held while an index is being built.
        self._state = threading.Condition()
        self._refreshing = False
        self._fitting = threading.Lock()   # one background fit at a time in this process
        self.defaults = default_params(settings)
        # The newest store revision seen, kept current by the watcher thread; requests read it.
        self._seen_revision: int | None = None
        self.watcher = RevisionWatcher(source.revision, self._observe_revision, settings.revision_poll_s)

    # -- index lifecycle -----------------------------------------------------------------
    def _is_current(self, live: LiveIndex | None, revision: int) -> bool:
        return live is not None and live.revision == revision and (live.vectors_ok or self.embedder is None)

    def live(self, wait: bool = False) -> LiveIndex:
        """The current index, kept off the request path. A request reads no database: the
        revision watcher (serving.watcher, one thread per process) polls the store revision every
        REVISION_POLL_S seconds and starts ONE background refresh when it moves; every request
        keeps being served from the old index until the new one replaces it. A rebuild embeds
        every task, which takes seconds; holding requests behind it would stall the whole API on
        each catalog edit.

        Only the very first build blocks (there is nothing to serve yet), as does `wait=True`
        (startup, evaluation, tests: "give me the index at the current revision", read from the
        database now).
        """
        self.watcher.ensure_running()
        revision = self._seen_revision
        if wait or revision is None:
            revision = self._note_revision(self.source.revision())
        live = self._live
        if not wait and self._is_current(live, revision):
            return live   # the common case, without the lock: `_live` is replaced whole, never mutated
        with self._state:
            while True:
                live = self._live
                if self._is_current(live, revision):
                    return live
                if not self._refreshing:
                    break
                if live is not None and not wait:
                    return live  # a refresh is in flight: serve the old index meanwhile
                self._state.wait()
            self._refreshing = True  # this caller owns the single refresh in flight
            if live is not None and not wait:
                self._start_background_refresh(live, revision)
                return live
        return self._refresh(live, revision)

    def close(self) -> None:
        """Stop the revision watcher (gunicorn's worker_exit; tests). A later live() restarts it."""
        self.watcher.stop()

    def _note_revision(self, revision: int) -> int:
        """Remember the newest store revision seen. The store's revision only moves forward (every
        write adds one), so an older value read concurrently never replaces a newer one."""
        with self._state:
            if self._seen_revision is None or revision > self._seen_revision:
                self._seen_revision = revision
            seen = self._seen_revision
        self.metrics.catalog_revision.set(seen)
        return seen

    def _observe_revision(self, revision: int) -> None:
        """The watcher's callback, once per poll: remember the revision and, when the live index
        is behind it (or lacks its task vectors), start the background refresh. A refresh that
        failed is thereby retried at the next poll. Before the first build it does nothing: the
        first build belongs to the first caller of live(), who waits for it."""
        revision = self._note_revision(revision)
        with self._state:
            live = self._live
            if live is None or self._refreshing or self._is_current(live, revision):
                return
            self._refreshing = True
            self._start_background_refresh(live, revision)

    def _start_background_refresh(self, live: LiveIndex, revision: int) -> None:
        """(The caller holds `_state` and has just set `_refreshing`.)"""
        threading.Thread(target=self._refresh_in_background, args=(live, revision),
                         name="index-refresh", daemon=True).start()

    def _refresh(self, live: LiveIndex | None, revision: int) -> LiveIndex:
        """Bring `live` to `revision` outside the state lock (only the owner of `_refreshing` runs
        this), publish it, and wake every caller waiting for it. An index at the right revision
        whose task vectors are missing (embeddings were down) only has its vectors retried."""
        fresh = None
        try:
            if live is None or live.revision != revision:
                fresh = self._build(revision)
            else:
                fresh = self._attach_vectors(live)
            return fresh
        finally:
            with self._state:
                if fresh is not None:
                    self._live = fresh
                    self._answers = AnswerCache(fresh, self.settings.answer_cache_size)
                self._refreshing = False
                self._state.notify_all()

    def _refresh_in_background(self, live: LiveIndex, revision: int) -> None:
        try:
            self._refresh(live, revision)
        except Exception:  # the old index keeps serving; the watcher's next poll tries again
            log.exception("search index refresh to revision %s failed; serving revision %s",
                          revision, live.revision)

    def _build(self, revision: int) -> LiveIndex:
        build_started = time.perf_counter()  # for the rebuild-duration metric
        tasks, cases = self.source.tasks(), tuple(self.source.cases())
        enrichment = self.enrichment(tasks) if self.enrichment is not None else None
        digest = cases_digest(tasks, cases)
        params, stale = self.params_for(digest)
        index = serving_index(self.settings, tasks, cases, params, IndexOptions(enrichment))
        index.warm()   # what the index defers is built here, off the request path
        live = LiveIndex(revision, index, cases, frozenset(r for t in tasks for r in t.roles), vectors_ok=False,
                         params=params, digest=digest, fit_stale=stale)
        live = self._attach_vectors(live)
        self.metrics.record_index_build(live, len(index.lexicon), time.perf_counter() - build_started)
        if self.refit_due(cases, stale):
            self.refit_in_background(live)
        return live

    def refit_due(self, cases: Sequence[CaseRecord], stale: bool) -> bool:
        """Whether serving `cases` with a fit not made on them (`stale`, from params_for) starts
        an automatic refit in the background (AUTO_FIT, and enough in-scope cases to fit on).
        The change preview says so: the fit it ranks with serves only until that refit is done."""
        return stale and self.settings.auto_fit and sum(1 for c in cases if c.gold) >= self.settings.fit_min_cases

    @property
    def fitting(self) -> bool:
        """Whether this process is fitting now (a background refit, or `refit_now`)."""
        return self._fitting.locked()

    def params_for(self, digest: str) -> tuple[RankerParams, bool]:
        """The fit that ranks the data of `digest` (search.pipeline.params_for: the newest fit made
        on exactly this data, so that a rollback ranks again with the fit it had; else the newest
        fit; else the shipped defaults), minus the learned pairs the admin blocked since (a block
        is a catalog edit: it moves the revision, so this runs at once, never per request; a fit
        that weighed a now-blocked pair is due again, and the refit drops it: usable_learned);
        and whether a (re)fit is due. The change and rollback previews (admin.preview) rank
        the data a change leaves with the fit this returns for it: the fit that will serve."""
        blocked = getattr(self.source, "blocked_pairs", None)
        return params_for(self.source, digest, self.defaults, self.settings.ranker_fit, blocked)

    def _attach_vectors(self, live: LiveIndex) -> LiveIndex:
        """Embed every task and exemplar (cached per text); without an answer, serve without
        the dense signals (the degraded mode has its own weights)."""
        if self.embedder is None or not live.index.tasks:
            return live
        try:
            index = attach(live.index, live.params, self.embedder)
        except EmbeddingUnavailable:
            return live
        return replace(live, index=index, vectors_ok=True)

    def refit_in_background(self, live: LiveIndex) -> threading.Thread | None:
        """Fit the ranker on the current cases in a daemon thread (one at a time per process)
        and store it; a store error or an embedding outage only logs: the old params keep serving."""
        if not self._fitting.acquire(blocking=False):
            return None

        def run() -> None:
            try:
                self.refit(live)
            except Exception:  # a failed background fit must never take the service down
                log.exception("background ranker fit failed")
            finally:
                self._fitting.release()

        thread = threading.Thread(target=run, name="taskfinder-fit", daemon=True)
        thread.start()
        return thread

    def refit_now(self) -> dict:
        """Fit in the foreground (CLI: `fit`, `load-demo`): first wait for a background fit in
        flight in this process (building the index may have started one; racing it would lose
        the lease and leave with nothing stored), then fit unless it stored one for these cases."""
        with self._fitting:
            return self.refit(self.live(wait=True))

    def refit(self, live: LiveIndex | None = None) -> dict:
        """Fit on the store's current tasks and cases and save the result; returns the report."""
        live = live or self.live()
        tasks, cases = list(live.index.tasks), list(live.cases)
        embedder = self.embedder if live.vectors_ok else None
        learned, blocked, unclicked = self._learned_inputs(embedder)
        latest = self.source.fit_for_digest(live.digest)
        if latest is not None and (latest.report or {}).get("learned", {}).get("digest") == learned_digest(
                usable_learned(learned, blocked, tasks)) and (latest.report or {}).get(
                "unclicked", {}).get("digest") == unclicked_digest(unclicked):
            return {"status": "up to date", "fit_id": latest.id}
        lease = getattr(self.source, "acquire_lease", None)
        if lease is not None and not lease(FIT_LEASE, FIT_LEASE_S):
            return {"status": "another process is fitting"}
        try:
            started = time.perf_counter()
            params, report = fit_ranker(self.settings, tasks, cases, embedder, self.defaults,
                                        LearnedInputs(learned, blocked, unclicked))
            report["seconds"] = round(time.perf_counter() - started, 1)   # what the preview quotes
            if report["status"] == "fitted":
                report["fit_id"] = self.source.save_fit(live.revision, live.digest, params.as_dict(), report)
            return report
        finally:
            if lease is not None:
                self.source.release_lease(FIT_LEASE)

    def _learned_inputs(self, embedder) -> LearnedInputs:
        """(learned exemplars, blocked pairs) for a fit: none when learning is off or there is no
        source (without embeddings the fit may still use them as exemplars: fit_ranker)."""
        if self.learned_evidence is None or not self.settings.learning_enabled:
            return LearnedInputs((), frozenset())
        return LearnedInputs(*self.learned_evidence())

    # -- request validation --------------------------------------------------------------
    def check_request(self, query: str | None, k: int) -> str:
        """The stripped query, or BadQuery. Roles are not checked here: they come verified
        (api.roles) and an error must never list the roles that exist."""
        problem = query_problem(query, self.settings.max_query_chars)
        if problem is not None:
            raise BadQuery(problem)
        if not 1 <= k <= self.settings.max_results:
            raise BadQuery(f"k must be between 1 and {self.settings.max_results}")
        return query.strip()

    @staticmethod
    def visible_roles(roles: Collection[str] | None, role: str | None, live: LiveIndex) -> frozenset[str]:
        """The roles whose restricted tasks this search may show: the caller's verified `roles`,
        narrowed to `role` when it is one of them (a role outside them grants nothing), and
        only roles some task has (which also bounds the index's per-role-set mask cache)."""
        verified = frozenset(roles or ())
        if role is not None and role in verified:
            verified = frozenset({role})
        return verified & live.roles

    # -- the pipeline --------------------------------------------------------------------
    def search(self, query: str | None, k: int = 10, roles: Collection[str] | None = None,
               role: str | None = None, rerank: bool | None = None, restrict_roles: bool = True,
               typing: bool | None = None, after: str | None = None, shown: Collection[str] = ()) -> dict:
        """The response of `answer(...)` as one dict (CLI, admin, tests)."""
        return self.answer(query, k, roles, role, rerank, restrict_roles, typing, after, shown).as_dict()

    def answer(self, query: str | None, k: int = 10, roles: Collection[str] | None = None,
               role: str | None = None, rerank: bool | None = None, restrict_roles: bool = True,
               typing: bool | None = None, after: str | None = None, shown: Collection[str] = (),
               language: str | None = None) -> Answer:
        """`roles`: the caller's *verified* roles (None: unrestricted tasks only); a task is
        visible if it has no roles or shares one with them. `role`: optionally one of `roles`
        to narrow to; any other value is ignored, never trusted. `typing`: whether the query is
        still being typed, where the caller knows (search.query.analyse_query); None: inferred.
        The request is read as search.request.SearchRequest.typed reads a text: a space typed
        after the last word finishes it (AnalysedQuery.finished). `after` and `shown`: the text
        whose answer the person sees and the task ids it shows; while the query extends it, a
        task on screen is not withdrawn unless the new characters speak against it (search.sequence).
        `language`: the language of the page the query was typed on, as the caller says (a language
        tag: lexicon.language.page_language keeps its primary subtag where the product reads that
        language, else none): the query's language where its text shows none.

        An answer without re-ranking is served from the live index's AnswerCache when the same
        query (same k, visible roles and role) was answered before on that index."""
        started = time.perf_counter()
        live = self.live()
        self.check_request(query, k)
        visible = self.visible_roles(roles, role, live)
        role = role if role is not None and visible == {role} else None
        if after is not None and len(after) > self.settings.max_query_chars:
            raise BadQuery(f"after is {len(after)} characters long; the limit is {self.settings.max_query_chars}")
        if len(shown) > MAX_HELD:
            raise BadQuery(f"shown lists {len(shown)} tasks; the limit is {MAX_HELD}")
        request = SearchRequest.typed(query, Viewer(visible, restrict_roles), k, typing, after=after, shown=shown,
                                      language=page_language(language))
        return self._serve(live, request, role, rerank, started)

    def serve(self, request: SearchRequest, rerank: bool | None = None) -> Answer:
        """The answer to a request built by the caller (search.request): the admin's case page
        asks for a test case's query as every other part does (SearchRequest.of_case: submitted,
        every role's tasks). Its viewer's roles are taken as verified."""
        started = time.perf_counter()
        live = self.live()
        self.check_request(request.query, request.k)
        viewer = request.viewer._replace(roles=request.viewer.roles & live.roles)
        return self._serve(live, request._replace(viewer=viewer), None, rerank, started)

    def _serve(self, live: LiveIndex, search: SearchRequest, role: str | None, rerank: bool | None,
               started: float) -> Answer:
        """`search` answered on `live`: from the answer cache where it may be, else ranked."""
        rerank = self.settings.rerank_default if rerank is None else rerank
        answers = self._answers if self._answers is not None and self._answers.owner is live else None
        request = Request(search, role, rerank)
        if answers is not None and not rerank:
            cached = answers.get(request)
            self.metrics.bound(self.metrics.answer_cache, "hit" if cached is not None else "miss").inc()
            if cached is not None:
                return self._replay(cached, started)
        answer = self._answer(live, request, started)
        if answers is not None and not rerank and not answer.body["degraded"]:
            answer = answer.with_encoding()  # encoded once, here, and replayed as bytes
            answers.put(request, answer)
        return answer

    def _replay(self, cached: Answer, started: float) -> Answer:
        """A cached answer (serving.answer_cache) as a new response: the same body and encoding,
        its own timings (0 for the stages it did not run, `answer_cache` for the lookup), and
        the same per-response metrics as a computed answer (the zero-result rate divides by
        stage="total")."""
        total = _ms(started)
        self.metrics.bound(self.metrics.stage_seconds, "total").observe(total / 1000.0)
        self.metrics.bound(self.metrics.search_seconds, "typeahead").observe(total / 1000.0)   # replays: rerank=0
        if not cached.body["results"]:
            self.metrics.bound(self.metrics.zero_results).inc()
        if cached.body["no_confident_match"]:
            self.metrics.bound(self.metrics.no_confident_match).inc()
        timings = dict.fromkeys(cached.timings_ms, 0.0)
        timings.update(answer_cache=total, total=total)
        return Answer(cached.body, timings, cached.encoded)

    def _answer(self, live: LiveIndex, request: Request, started: float) -> Answer:
        """The pipeline proper, on a validated request: analyse, embed, prefilter, abstain or
        answer, re-rank; the answer with its per-stage timings. A query without words is not
        embedded (its dense signals would rank on stopwords alone)."""
        search, role, rerank = request.search, request.role, request.rerank
        query, k, visible, restrict_roles = search.query, search.k, search.viewer.roles, search.viewer.restrict
        timings: dict[str, float] = {}
        degraded: list[str] = []

        pipeline = make_pipeline(live.index, live.params, self.settings, self.embedder if live.vectors_ok else None)
        stage = time.perf_counter()
        analysed = pipeline.analyse(search)
        timings["analyse"] = _ms(stage)

        stage = time.perf_counter()
        query_vector = None
        if self.embedder is not None and analysed.words:
            try:
                if not live.vectors_ok:
                    raise EmbeddingUnavailable("task vectors are not built")
                query_vector = pipeline.embed([analysed])[0]
            except EmbeddingUnavailable:
                degraded.append("embeddings_unavailable")
        timings["embedding"] = _ms(stage)

        stage = time.perf_counter()
        params = live.params
        # TaskRecord.visible_to takes a set of roles as well as one role; a frozenset is hashable,
        # so the index's visibility cache keys on it unchanged.
        depth = max(k, params.shortlist_size)
        ranked_query = pipeline.rank(search, analysed, query_vector, k=depth)
        hidden, shadow = self._hidden_from_caller(pipeline, search, analysed, query_vector, live, ranked_query, depth) \
            if restrict_roles else (0, False)
        if shadow:   # the best evidence is a task the caller may not see: not sure (search.confidence.in_hidden_shadow)
            ranked_query = ranked_query.refused()
        result, confidence = ranked_query.result, ranked_query.confidence
        timings["prefilter"] = _ms(stage)

        confident = ranked_query.answers(k)   # a confident answer, or tasks on screen the sequence holds
        nearest = result.ranked[:depth]   # the ranking's own top, not the tasks on screen ranked besides
        if not confident:
            result = replace(result, ranked=[])
        stage = time.perf_counter()
        ranked, rerank_info = self._rerank(printable(query), result, live, rerank, degraded)
        timings["rerank"] = _ms(stage)
        timings["total"] = _ms(started)

        for name, value in timings.items():
            self.metrics.stage_seconds.labels(name).observe(value / 1000.0)
        self.metrics.bound(self.metrics.search_seconds, "rerank" if rerank else "typeahead").observe(timings["total"] / 1000.0)
        for flag in degraded:
            self.metrics.degraded.labels(flag).inc()
        # the score-tail cut (search.confidence.shown) and the tasks on screen the sequence holds
        # (search.sequence), kept by identity: results keep their position
        order = [item for _, item in ranked]
        listed = ranked_query.displayed(order, k)
        kept = {id(item) for item in listed}
        on_its_own = {id(item) for item in shown(order[:k], ranked_query.tail)} if confidence.answer else set()
        results = [self._result_row(item, rerank_info["reasons"].get(position), live.index.category_labels)
                   for position, item in ranked if id(item) in kept]
        if not results:
            self.metrics.bound(self.metrics.zero_results).inc()
        if not confident:
            self.metrics.bound(self.metrics.no_confident_match).inc()
        rerank_info.pop("reasons")
        said = said_corrections(live.index, result.corrections, visible or None, restrict_roles)
        offered = [] if results else [s.as_dict() for s in suggest(
            query, analysed.words, said, [(item.task.name, item.score) for item in nearest],
            (task.category for task in live.index.visible(visible or None, restrict_roles)[1]),
            out_of_scope=live.out_of_scope, known_words=live.index.text_words)]
        return Answer({
            "query": query,
            "k": k,
            "role": role,
            "roles": sorted(visible),
            "language": analysed.language,
            "results": results,
            "no_confident_match": not confident,
            "suggestions": offered,
            "empty_state": empty_state(results, offered),
            "degraded": degraded,
            "corrections": {w: [{"word": c, "similarity": round(s, 3)} for c, s in found]
                            for w, found in said.items()},
            "weights": {name: round(w, 4) for name, w in result.effective_weights.items()},
            "ranker": {**params.summary(), "mode": result.mode, "confidence": confidence.logit},
            "rerank": rerank_info,
            "hidden_by_role": hidden,
            # the results shown only because they were on screen and the typing since did not speak
            # against them (search.sequence): every result of an answer the abstention alone would
            # refuse, else those the tail cut alone would drop; empty unless the request said what is on screen
            "held": [item.task.id for item in listed if id(item) not in on_its_own],
        }, timings)

    def _hidden_from_caller(self, pipeline: Pipeline, search: SearchRequest, analysed, query_vector,
                            live: LiveIndex, mine: Ranked, depth: int) -> tuple[int, bool]:
        """(how many of the top k tasks for every role, a confident answer only, the caller may not
        see: a count, never which; whether the caller's answer `mine` stands in the shadow of such
        a task: search.confidence.in_hidden_shadow), every role's ranking `depth` deep as the
        caller's. Costs a second ranking only when some task is hidden from the caller (the
        answer cache keeps it for repeated type-ahead prefixes)."""
        visible, k = search.viewer.roles, search.k
        if not (live.roles - visible):
            return 0, False
        # the ranking's count, not the screen's: what is on screen is the caller's (without `held`,
        # the request's `quiet` and `same_word` say nothing: search.sequence.displayed)
        everyone = pipeline.rank(search._replace(viewer=EVERYONE, explain=False, held=()),
                                 analysed, query_vector, k=depth)
        can_see = lambda task: task.visible_to(visible or None)   # noqa: E731
        count = sum(1 for item in everyone.shown(k) if not can_see(item.task))
        best = mine.result.ranked[0].task.id if mine.answered and mine.result.ranked else None
        shadow = in_hidden_shadow(everyone.result.ranked if everyone.answered else [], best, can_see,
                                  self.settings.hidden_shadow_ratio)
        return count, shadow

    def _rerank(self, query: str, result: PrefilterResult, live: LiveIndex, requested: bool,
                degraded: list[str]) -> tuple[list, dict]:
        """Re-order the K-item shortlist with the LLM when asked and useful; never fail."""
        shortlist = result.ranked[: live.params.shortlist_size]
        tail = result.ranked[live.params.shortlist_size:]
        plain = list(enumerate(result.ranked))
        info = {"requested": requested, "applied": False, "skipped": None, "reasons": {}}
        if not requested or len(shortlist) < 2:
            info["skipped"] = "not_requested" if not requested else "shortlist_too_small"
            return plain, info
        if self.reranker is None:
            info["skipped"] = "no_endpoint"
            return plain, info
        if shortlist[0].pinned:  # a test case answers this exact query: the LLM may not override it
            info["skipped"] = "pinned"
            self.metrics.rerank_calls.labels("skipped_pinned").inc()
            return plain, info
        if skip_rerank(result, self.settings.rerank_skip_probability):
            info["skipped"] = "confident_prefilter"
            self.metrics.rerank_calls.labels("skipped_confident").inc()
            return plain, info
        candidates = [Candidate(idx=i, task_id=s.task.id, name=s.task.name, help=s.task.help)
                      for i, s in enumerate(shortlist)]
        names = {t.id: t.name for t in live.index.tasks}
        outcome = self.reranker.rerank(query, candidates, select_examples(query, live.cases, names))
        info.update(applied=outcome.degraded is None and outcome.skipped is None, skipped=outcome.skipped,
                    model=outcome.model, latency_ms=round(outcome.latency_ms, 3), cached=outcome.cached,
                    tokens={"prompt": outcome.prompt_tokens, "completion": outcome.completion_tokens},
                    dropped=dict(outcome.dropped), llm_order=list(outcome.llm_order))
        info["reasons"] = dict(outcome.reasons)
        if outcome.degraded:
            degraded.append(outcome.degraded)
        self.metrics.rerank_calls.labels(outcome.degraded or outcome.skipped or
                                         ("cache_hit" if outcome.cached else "ok")).inc()
        for reason, count in outcome.dropped.items():
            self.metrics.rerank_dropped.labels(reason).inc(count)
        self.metrics.rerank_tokens.labels("prompt").inc(outcome.prompt_tokens)
        self.metrics.rerank_tokens.labels("completion").inc(outcome.completion_tokens)
        reordered = [(i, shortlist[i]) for i in outcome.order]
        return reordered + [(len(shortlist) + j, s) for j, s in enumerate(tail)], info

    @staticmethod
    def _result_row(item, reason: str | None, category_labels) -> dict:
        task = item.task
        row = {"id": task.id, "name": task.name, "help": task.help, "url": task.url,
               "category": task.category, "category_label": category_labels.get(task.category),
               "score": round(item.score, 4), "signals": item.signals,
               "probability": round(item.probability, 4), "contributions": item.contributions, "matched": item.matched,
               "pinned": item.pinned,
               # what each signal that added to the score says, for the "why" line (Signal.says, search/signal/)
               "signal_phrases": {name: PHRASES[name] for name, added in item.contributions.items()
                                  if added > 0 and name in PHRASES}}
        if reason:
            row["reason"] = reason
        return row

