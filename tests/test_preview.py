"""The admin ranking preview (search.preview) on the demo catalog, with the bundled embeddings.

Speed is measured by ops/bench_preview.py, never here.
"""
from __future__ import annotations

import json
from dataclasses import replace

import pytest
from flask import render_template

from catalog.records import CaseRecord
from lexicon.rationale import build_lexicon
from lexicon.text import stem, words
from web.metrics import Metrics
from search.index import analyse_tasks, build_index
from search.preview import preview_change
from search.service import SearchService

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
