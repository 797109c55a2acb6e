"""The admin ranking preview (admin.preview, measured by evaluation.impact) on the demo catalog, with the
bundled embeddings.

Speed is measured by ops/bench_preview.py, never here.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

import pytest
from flask import render_template

from catalog.records import CaseRecord
from lexicon.rationale import build_lexicon
from lexicon.text import stem, words
from infra.metrics import Metrics
from search.index import analyse_tasks, build_index
from admin.preview import preview_change
from evaluation.impact import ImpactMemo
from search.request import EVERY_ROLE
from serving.service import SearchService

ASQ = "health.asq3-screening"
FPA = "family.fpa"


@pytest.fixture(scope="module")
def service(demo_app):
    return demo_app.extensions["taskfinder"].search


def demo(service):
    store = service.source
    return store.tasks(include_inactive=True), store.cases()


def case_named(cases, query: str) -> CaseRecord:
    return next(c for c in cases if c.query == query)


def test_adding_a_case_adds_its_lexicon_links(service):
    tasks, cases = demo(service)
    new = CaseRecord(query="plot a child's growth chart", gold=("health.growth-bmi",),
                     rationale="Growth is tracked with height and weight percentiles.", category="synonym")
    report = preview_change(service, tasks, cases, tasks, [*cases, new], [new.query])

    terms = {stem(w) for w in words(f"{new.query} {new.rationale}")}
    before = build_lexicon(cases)
    linked_before = {t for t in terms if "health.growth-bmi" in before.tasks_for(t)}
    assert {(l.term, l.task_id) for l in report.links_added} == {(t, "health.growth-bmi") for t in terms - linked_before}
    assert {(l.term, l.task_id) for l in report.links_changed} == {(t, "health.growth-bmi") for t in linked_before}
    assert not report.links_removed
    for link in report.links_added:
        assert link.cases_before == 0 and link.cases_after == 1
        assert link.weight_before is None and link.weight_after > 0
        assert link.surface and all(stem(w) == link.term for w in link.surface)
    # the new case's own query now pins its gold first
    (edited,) = report.queries
    assert edited.after.tasks[0].id == "health.growth-bmi" and edited.after.tasks[0].pinned
    assert report.cv_after.n == report.cv_before.n + 1


def test_moving_a_querys_gold_changes_its_ranking(service):
    tasks, cases = demo(service)
    moved = case_named(cases, "developmental screening")
    assert ASQ in moved.gold and FPA not in moved.gold
    after = [replace(c, gold=(FPA,)) if c is moved else c for c in cases]
    report = preview_change(service, tasks, cases, tasks, after, [moved.query])

    (edited,) = report.queries
    assert edited.gold == (FPA,)
    assert [t.id for t in edited.before.tasks[:len(moved.gold)]] == list(moved.gold)
    assert all(t.pinned for t in edited.before.tasks[:len(moved.gold)])
    assert edited.after.tasks[0].id == FPA and edited.after.tasks[0].pinned
    assert ASQ in [t.id for t in edited.after.tasks][1:]   # the evidence for the old task is still there
    assert moved.query in [c.query for c in report.changed_cases]
    # no other case names FPA for these words: cross-validation says the new gold does not generalise
    assert moved.query in [f.query for f in report.newly_failing]
    assert report.cv_after.hit_at_5 < report.cv_before.hit_at_5
    # the case's words lose one link to each old gold task and gain one to FPA
    fewer = {(l.term, l.task_id) for l in report.links_removed + report.links_changed if l.cases_after == l.cases_before - 1}
    more = {(l.term, l.task_id) for l in report.links_added + report.links_changed if l.cases_after == l.cases_before + 1}
    case_terms = {stem(w) for w in words(f"{moved.query} {moved.rationale}")}
    assert fewer == {(t, g) for t in case_terms for g in moved.gold} and more == {(t, FPA) for t in case_terms}


def test_retiring_a_task_shows_the_cases_it_breaks(service):
    tasks, cases = demo(service)
    after_tasks = [replace(t, active=False) if t.id == ASQ else t for t in tasks]
    report = preview_change(service, tasks, cases, after_tasks, cases, [])

    only_asq = {c.query for c in cases if c.gold == (ASQ,)}
    broken = {c.query for c in report.changed_cases if c.status == "broken"}
    assert only_asq and only_asq <= broken
    assert all(ASQ in c.gold for c in report.changed_cases if c.status == "broken")
    assert all(ASQ not in [t.id for t in c.after.tasks] for c in report.changed_cases)
    assert report.changed_cases[0].status == "broken"   # the worst first
    assert report.newly_failing and all(ASQ in f.gold for f in report.newly_failing)
    assert report.cv_after.hit_at_5 < report.cv_before.hit_at_5


def test_a_no_op_change_reports_no_difference(service):
    tasks, cases = demo(service)
    report = preview_change(service, tasks, cases, list(tasks), list(cases), [cases[0].query])

    assert not (report.links_added or report.links_removed or report.links_changed)
    assert not report.changed_cases
    assert report.cv_before == report.cv_after and report.cv_before.n == sum(1 for c in cases if c.gold)
    assert not (report.newly_failing or report.newly_passing)
    (edited,) = report.queries
    assert edited.before == edited.after and edited.status == "unchanged"
    assert report.mode == "full"
    body = report.as_dict()
    assert json.loads(json.dumps(body)) == body
    assert body["cv_delta"] == {"hit_at_5": 0.0, "mrr": 0.0}


def test_without_embeddings_the_preview_ranks_in_the_degraded_mode(service):
    sparse = SearchService(service.settings, service.source, None, None, Metrics())
    tasks, cases = demo(service)
    report = preview_change(sparse, tasks, cases, tasks, cases[:-1], [cases[-1].query])
    assert report.mode == "sparse"
    assert report.cv_after.n in (report.cv_before.n, report.cv_before.n - 1)


def test_the_partial_renders_escaped(service, demo_app):
    tasks, cases = demo(service)
    hostile = CaseRecord(query="<script>alert(1)</script> asq", gold=(ASQ,), rationale="<b>bold</b> screening")
    report = preview_change(service, tasks, cases, tasks, [*cases, hostile], [hostile.query]).as_dict()
    with demo_app.test_request_context("/admin/"):
        html = render_template("admin/_preview.html", preview=report)
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt; asq" in html
    assert "<b>" not in html
    assert "Cross-validated suite" in html and "Lexicon links" in html
    assert f"<code>{ASQ}</code>" in html


def test_reusing_the_task_half_builds_the_same_index(demo_tasks, demo_cases, settings):
    half = analyse_tasks(demo_tasks, settings.field_weights)
    for cases in (demo_cases, demo_cases[:40], []):
        lexicon = build_lexicon(cases)
        plain = build_index(demo_tasks, lexicon, settings.field_weights, cases=cases)
        reused = build_index(demo_tasks, lexicon, settings.field_weights, cases=cases, task_text=half)
        assert plain.vocabulary == reused.vocabulary and plain.surface_words == reused.surface_words
        for name in ("lexical", "rationale"):
            assert (getattr(plain, name) != getattr(reused, name)).nnz == 0
        assert (plain.exemplars.lexical != reused.exemplars.lexical).nnz == 0
        assert plain.exemplars.texts == reused.exemplars.texts


def test_remembered_words_are_not_shared_lists():
    first = words("Developmental screening")
    first.append("mutated")
    assert words("Developmental screening") == ["developmental", "screening"]


# -- whose ranking, and what an out-of-scope case does (issue 19 items 2 and 3) ----------------------
CHECKS = "hr.background-checks"   # roles hr, director: the public never sees it


def test_the_preview_ranks_as_the_public_by_default_and_warns_of_a_restricted_gold(service, demo_app):
    tasks, cases = demo(service)
    assert next(t for t in tasks if t.id == CHECKS).roles
    query = case_named(cases, "background checks").query

    public = preview_change(service, tasks, cases, tasks, cases, [query])
    (edited,) = public.queries
    assert public.view_as == "" and CHECKS not in [t.id for t in edited.after.tasks]
    assert all(not next(t for t in tasks if t.id == r.id).roles for r in edited.after.tasks)
    assert [(h.task_id, h.queries) for h in public.hidden_gold] == [(CHECKS, (query,))]

    for viewer in ("hr", EVERY_ROLE):
        seen = preview_change(service, tasks, cases, tasks, cases, [query], view_as=viewer)
        (edited,) = seen.queries
        assert edited.after.tasks[0].id == CHECKS and edited.after.tasks[0].pinned
        assert not seen.hidden_gold
    assert "hr" in public.roles and "director" in public.roles

    with demo_app.test_request_context("/admin/"):
        html = render_template("admin/_preview.html", preview=public.as_dict())
    assert "what an anonymous user (the public) would see" in html
    assert "will not see this gold task" in html and f"<code>{CHECKS}</code> (roles: hr, director)" in html


def test_an_out_of_scope_case_says_what_it_does(service, demo_app):
    tasks, cases = demo(service)
    weather = CaseRecord(query="what is the weather", gold=())
    oos = sum(1 for c in cases if not c.gold)
    report = preview_change(service, tasks, cases, tasks, [*cases, weather], [weather.query])

    (edited,) = report.queries
    assert edited.status == "out_of_scope"
    note = report.abstention
    assert (note.oos_before, note.oos_after) == (oos, oos + 1)
    assert note.model == (service.live().params.abstention_for(report.mode) is not None)
    assert edited.before.abstained == edited.after.abstained   # nothing refitted: the same answer

    with demo_app.test_request_context("/admin/"):
        html = render_template("admin/_preview.html", preview=report.as_dict())
    assert "no confident match" in html and "trains the model that decides when to refuse" in html
    assert f"{oos} out-of-scope test case{'' if oos == 1 else 's'} now, {oos + 1} after this change" in html
    assert "“what is the weather” the search" in html
    assert ("There is no fitted" in html) == (not note.model)


def test_with_a_fitted_model_the_note_names_what_it_was_fitted_on():
    from search.confidence import AbstentionModel
    from evaluation.impact import abstention_note
    from search.ranker import RankerParams

    model = AbstentionModel(("margin",), (1.0,), 0.0, 0.0, {"n_negatives": {"case": 31, "offtopic": 700},
                                                               "kind": "discriminative"})
    params = RankerParams(None, 10, {"full": model, "sparse": None}, "fit", 7)
    cases = [CaseRecord("a", ("t",)), CaseRecord("b", ())]
    note = abstention_note(params, "full", True, cases, cases[:1])
    assert (note.model, note.fitted_oos, note.oos_before, note.oos_after) == (True, 31, 1, 0)
    assert (note.kind, note.other_negatives) == ("discriminative", 700)
    assert not abstention_note(params, "sparse", True, cases, cases).model


class Reloaded:
    """The service after a reload that changed nothing: a live state equal in content, but
    another one (any reload, refit or publish makes one)."""

    def __init__(self, service):
        self._service = service
        self._live = replace(service.live())

    def live(self, *args, **kwargs):
        return self._live

    def __getattr__(self, name):
        return getattr(self._service, name)


def test_a_memo_answers_a_preview_made_before_and_never_one_made_for_another_live_state(service):
    """A confirmation page shown again (admin.blueprint.AdminState.previews) is answered from the
    memo: the same report, not a second preview. Anything it depends on, the viewer or the live
    state it ranked with included, makes another preview."""
    tasks, cases = demo(service)
    new = CaseRecord(query="plot a child's growth chart", gold=("health.growth-bmi",))
    change = (tasks, cases, tasks, [*cases, new], [new.query])
    memo = ImpactMemo()
    first = preview_change(service, *change, memo=memo)
    assert preview_change(service, *change, memo=memo) is first
    assert preview_change(service, *change, view_as=EVERY_ROLE, memo=memo) is not first
    assert preview_change(service, tasks, cases, tasks, [*cases, replace(new, gold=("health.immunizations",))],
                          [new.query], memo=memo) is not first
    reloaded = preview_change(Reloaded(service), *change, memo=memo)
    assert reloaded is not first
    assert reloaded.as_dict() | {"elapsed_ms": 0} == first.as_dict() | {"elapsed_ms": 0}   # the same content


def test_the_next_preview_against_the_same_catalog_cross_validates_only_its_after_side(service, monkeypatch):
    """ImpactMemo keeps each side's cross-validated ranks: a second, different edit of the same
    live catalog ranks its before side from the memo, and its report is the one a preview
    without the memo makes."""
    import evaluation.impact as impact

    tasks, cases = demo(service)
    computed = []
    real = impact._cv_ranks_now
    monkeypatch.setattr(impact, "_cv_ranks_now", lambda bench, t, c, p: computed.append(len(c)) or real(bench, t, c, p))
    memo = ImpactMemo()
    first = CaseRecord(query="plot a child's growth chart", gold=("health.growth-bmi",))
    second = CaseRecord(query="shots a child still needs", gold=("health.immunizations",))
    preview_change(service, tasks, cases, tasks, [*cases, first], [first.query], memo=memo)
    assert computed == [len(cases), len(cases) + 1]            # before and after
    report = preview_change(service, tasks, cases, tasks, [*cases, second], [second.query], memo=memo)
    assert computed == [len(cases), len(cases) + 1, len(cases) + 1]   # the after side only
    alone = preview_change(service, tasks, cases, tasks, [*cases, second], [second.query])
    assert report.as_dict() | {"elapsed_ms": 0} == alone.as_dict() | {"elapsed_ms": 0}


def test_the_next_preview_of_the_same_live_state_ranks_only_its_after_side(service, monkeypatch):
    """ImpactMemo keeps the live side's rankings of every test case (evaluation.impact._Workbench.adopt):
    a second, different edit ranks only its after side (and, on its before side, its own new
    query), a preview as another viewer or against
    another live state ranks its before side again, and each report is the one a preview without
    the memo makes."""
    import evaluation.impact as impact

    tasks, cases = demo(service)
    ranked = []
    real = impact._Workbench._rank
    monkeypatch.setattr(impact._Workbench, "_rank",
                        lambda bench, side, query, gold: ranked.append(id(side)) or real(bench, side, query, gold))
    memo = ImpactMemo()
    first = CaseRecord(query="plot a child's growth chart", gold=("health.growth-bmi",))
    second = CaseRecord(query="shots a child still needs", gold=("health.immunizations",))
    preview_change(service, tasks, cases, tasks, [*cases, first], [first.query], memo=memo)
    assert len(set(ranked)) == 2 and len(ranked) >= 2 * len(cases)     # both sides: every case
    ranked.clear()
    report = preview_change(service, tasks, cases, tasks, [*cases, second], [second.query], memo=memo)
    counts = sorted(Counter(ranked).values())
    assert counts == [1, len(cases) + 1]   # before: only the edited query, new to it; after: every case
    alone = preview_change(service, tasks, cases, tasks, [*cases, second], [second.query])
    assert report.as_dict() | {"elapsed_ms": 0} == alone.as_dict() | {"elapsed_ms": 0}
    for other in (lambda: preview_change(service, tasks, cases, tasks, [*cases, second], [second.query],
                                         view_as=EVERY_ROLE, memo=memo),
                  lambda: preview_change(Reloaded(service), tasks, cases, tasks, [*cases, second], [second.query],
                                         memo=memo)):
        ranked.clear()
        other()
        assert len(set(ranked)) == 2 and len(ranked) >= 2 * len(cases)   # before and after again


def test_the_cross_validation_reads_each_rank_off_the_ranked_ids_where_the_whole_ranking_puts_it(service):
    """evaluation.impact._Workbench.cv_rank reads a case's cross-validated rank off the ranked ids
    (search.pipeline.Pipeline.ranked_ids): for every case of the demo, on one fold's index and on
    the live one, the rank of its first gold task in the pipeline's whole ranking (every task
    visible, no pins), and None where there is no gold or no word."""
    import evaluation.impact as impact
    from search.fitting import FOLDS
    from search.fitting.cv import cv_folds
    from search.request import EVERYONE, SearchRequest

    tasks, cases = demo(service)
    live = service.live()
    bench = impact._Workbench(impact.Serving(service.settings, service.embedder, service.enrichment, live),
                              service.embedder, EVERYONE, None)
    fit, _held = next(iter(cv_folds(list(cases), FOLDS, impact.CV_SEED, bench.embedder)))
    fold = bench.index(tasks, fit, live.params, fitted_prototypes=False)
    bench.adopt(live.index, cases, live.params)
    whole = bench.index(tasks, cases, live.params, fitted_prototypes=True)
    checked = 0
    for side in (fold, whole):
        for case in [*cases, CaseRecord(query="zzqx", gold=(ASQ,)), CaseRecord(query="not a task at all", gold=())]:
            pipeline = side.pipeline
            request = SearchRequest.of_case(case.query, EVERYONE, k=impact.CV_DEPTH, pins=False, explain=False)
            analysed = pipeline.analyse(request)
            ids = [r.task.id for r in pipeline.rank(request, analysed, pipeline.embed([analysed])[0]).result.ranked]
            expected = next((i + 1 for i, task_id in enumerate(ids) if task_id in case.gold), None) \
                if case.gold and analysed.words else None
            assert bench.cv_rank(side, case.query, case.gold) == expected, case.query
            checked += expected is not None
    assert checked > len(cases)   # most cases' gold is within the top 50 on both indexes


class FlakyEmbeddings:
    """The service with an embedder that fails its first `failures` calls (an outage that ends)."""

    def __init__(self, service, failures: int = 1):
        self._service, self.failures = service, failures

    @property
    def embedder(self):
        outer, inner = self, self._service.embedder

        class Flaky:
            model = inner.model

            def embed(self, texts, kind):
                from search.embeddings import EmbeddingUnavailable

                if outer.failures > 0:
                    outer.failures -= 1
                    raise EmbeddingUnavailable("injected outage")
                return inner.embed(texts, kind)
        return Flaky()

    def __getattr__(self, name):
        return getattr(self._service, name)


def test_a_preview_that_embeddings_failing_degraded_is_not_kept(service):
    """Made while the embeddings failed, a preview ranks in the sparse mode (as the service
    would) and says so; the memo does not keep it: once they answer again, the same preview is
    made again in the full mode."""
    tasks, cases = demo(service)
    new = CaseRecord(query="a brand new wording about bumped heads on the slide", gold=("health.injury-report",))
    change = (tasks, cases, tasks, [*cases, new], [new.query])
    memo = ImpactMemo()
    flaky = FlakyEmbeddings(service)
    degraded = preview_change(flaky, *change, memo=memo)
    assert degraded.mode == "sparse"
    again = preview_change(flaky, *change, memo=memo)
    assert again.mode == "full" and preview_change(flaky, *change, memo=memo) is again


# -- what the preview warns of is this change's, in plain counts (issue 44 item 5) ------------------
def test_an_edit_warns_only_of_the_hidden_gold_it_touches(service, demo_app):
    """A Dental Exam alias edit moves other cases' rankings (a restricted Background Checks case
    among them, maybe), but hides nothing: no warning. Giving Dental Exam a role does hide it,
    and the warning names the cases that name it."""
    tasks, cases = demo(service)
    dental = next(t for t in tasks if t.id == "health.dental-exam")
    dental_cases = [c.query for c in cases if dental.id in c.gold]
    with_alias = [replace(t, aliases=(*t.aliases, "teeth check", "fingerprinted")) if t.id == dental.id else t
                  for t in tasks]
    alias_edit = preview_change(service, tasks, cases, with_alias, cases, dental_cases[:2])
    assert alias_edit.view_as == "" and not alias_edit.hidden_gold, alias_edit.hidden_gold
    hidden_elsewhere = [c.query for c in alias_edit.changed_cases if CHECKS in c.gold]
    assert not any(h.task_id == CHECKS for h in alias_edit.hidden_gold), hidden_elsewhere

    restricted = [replace(t, roles=("health",)) if t.id == dental.id else t for t in tasks]
    role_edit = preview_change(service, tasks, cases, restricted, cases, [])
    assert [h.task_id for h in role_edit.hidden_gold] == [dental.id]
    named = set(role_edit.hidden_gold[0].queries)
    assert named and named <= set(dental_cases)
    assert named == {c.query for c in role_edit.changed_cases if dental.id in c.gold}


def test_the_preview_counts_in_words(service, demo_app):
    """"1 case newly fails", "0 out-of-scope test cases", never "case(s)"; queries in quotes that
    survive copying (“…”, not only <q>'s drawn ones)."""
    tasks, cases = demo(service)
    query = case_named(cases, "background checks").query
    report = preview_change(service, tasks, cases, tasks, [c for c in cases if c.gold], [query])
    with demo_app.test_request_context("/admin/"):
        html = render_template("admin/_preview.html", preview=report.as_dict())
    assert "(s)" not in html
    n = report.abstention.oos_before
    assert f"{n} out-of-scope test case{'' if n == 1 else 's'} now, 0 after this change" in html
    assert f"“{query}”" in html and "<q>" not in html
