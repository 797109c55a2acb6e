"""The ranking preview predicts the live ranking (issue 35: one pipeline; issue 32 item 6).

Random edits, fits and rollbacks are published one after another on the demo catalog with its
shipped fit (embeddings on). Before each is published, the admin's preview (admin.preview) of
that change ranks a set of queries; once it is published, the live service (the index rebuilt
from the store, the fit SearchService.params_for picks) answers the same queries. The preview's
"after" ranking must be the live ranking, query for query: the same tasks, scores and "no
confident match". A rollback past a newer fit is the case that used to fail: the service ranks
the restored data with the fit made on it, while the preview ranked with the newest one.
"""
from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

from admin.preview import preview_change
from catalog.records import CaseRecord
from tests.conftest import build_app, close_app, install_demo_fit, make_settings

# the last two are Spanish: ranked with the foreign weights against the tasks' query-side vectors,
# which the preview must attach as serving does (evaluation.impact, search.assembly.attach_vectors)
QUERIES = ["Waitlist", "eligibility", "developmental screening", "bus", "parent involvement",
           "meal count", "immunization records", "hearing and vision screening", "staff training",
           "registro de vacunas de los niños", "prueba de audición"]
RANDOM_STEPS = 6


@pytest.fixture
def app(tmp_path, shared_cache_dir, demo_tasks, demo_cases):
    app = build_app(make_settings(tmp_path, shared_cache_dir), demo_tasks, demo_cases)
    install_demo_fit(app)
    yield app
    close_app(app)


def live_top(search, query: str) -> tuple[tuple[tuple[str, float], ...], bool]:
    """((id, score) of what /api/search shows an anonymous caller who submits the query (typing=0:
    the preview ranks an edited query as a test case's, submitted: search.request.SearchRequest.of_case),
    k=5, no LLM), refused."""
    body = search.search(query, k=5, rerank=False, typing=False)
    return tuple((r["id"], r["score"]) for r in body["results"]), body["no_confident_match"]


def predicted_top(comparison) -> tuple[tuple[tuple[str, float], ...], bool]:
    after = comparison.after
    return tuple((t.id, t.score) for t in after.tasks if not after.abstained), after.abstained


def scaled(params: dict, factor: float) -> dict:
    """Stored fit parameters with every fusion weight multiplied by `factor` (another ranking)."""
    params = json.loads(json.dumps(params))
    for group in ("weights", "typing"):
        for mode in (params.get(group) or {}).values():
            for name in mode:
                mode[name] = mode[name] * factor
    return params


def test_the_preview_of_random_edits_fits_and_rollbacks_is_the_live_ranking_after_publishing(app):
    services = app.extensions["taskfinder"]
    store, search = services.store, services.search
    rng = random.Random(35)
    marks = [store.versions(limit=1)[0].id]     # versions one may roll back to
    other_fit = 0                               # previews whose after-fit was not the live one

    def publish(after_tasks, after_cases, queries, write) -> None:
        nonlocal other_fit
        live = search.live(wait=True)
        tasks, cases = store.tasks(), store.cases()
        report = preview_change(search, tasks, cases, after_tasks, after_cases, queries)
        if report.ranker["fit_id"] != live.params.fit_id:
            other_fit += 1
        write()
        search.live(wait=True)
        for comparison in report.queries:
            assert predicted_top(comparison) == live_top(search, comparison.query), comparison.query

    # First each kind once, ending with a rollback past a fit to the data the shipped fit was made
    # on (that fit ranks again); then random steps.
    script = ["edit case", "add case", "fit", "edit task", "rollback to the start"]
    for step in range(len(script) + RANDOM_STEPS):
        action = script[step] if step < len(script) else rng.choice(["edit case", "add case", "edit task", "fit",
                                                                     "rollback"])
        tasks, cases = store.tasks(), store.cases()
        task_ids = [t.id for t in tasks]
        if action == "edit case":
            case = rng.choice([c for c in cases if c.gold])
            edited = replace(case, gold=(rng.choice(task_ids),), rationale=f"step {step}")
            publish(tasks, [edited if c.id == case.id else c for c in cases], [*QUERIES, case.query],
                    lambda: store.update_case(case.id, case.version, edited, message=f"step {step}"))
        elif action == "add case":
            source = rng.choice(tasks)
            added = CaseRecord(f"{source.name.split()[0].lower()} for step {step}", (rng.choice(task_ids),),
                               "a random edit")
            publish(tasks, [*cases, added], [*QUERIES, added.query], lambda: store.add_case(added))
        elif action == "edit task":
            task = rng.choice(tasks)
            edited = replace(task, name=f"{task.name} roster", aliases=task.aliases[:1])
            publish([edited if t.id == task.id else t for t in tasks], cases, QUERIES,
                    lambda: store.update_task(task.id, task.version, edited))
        elif action == "fit":   # a fit lands for the current data, as the background refit stores it
            live = search.live(wait=True)
            store.save_fit(store.revision(), live.digest, scaled(live.params.as_dict(), rng.uniform(0.5, 1.6)),
                           {"status": "fitted"})
            search.live(wait=True)
        else:
            target = marks[0] if action == "rollback to the start" else rng.choice(marks[:-1] or marks)
            plan = store.rollback_plan(target)
            if plan.changes:
                publish(list(plan.tasks), list(plan.cases), QUERIES, lambda: store.rollback(target))
        marks.append(store.versions(limit=1)[0].id)
    assert other_fit, "no step previewed data that a fit other than the live one ranks (e.g. a rollback past a fit)"


def test_rolling_back_an_out_of_scope_case_is_previewed_as_it_will_serve_and_said_as_a_removal(app):
    """Issue 32 item 6: add an out-of-scope case (a fit lands for it), roll back to the version
    before it. The preview must rank with the fit that serves after the rollback (the shipped one,
    made on that data), and say that publishing removes the query from the out-of-scope examples."""
    from flask import render_template

    services = app.extensions["taskfinder"]
    store, search = services.store, services.search
    query = "where do i renew my parking permit at the district office"
    mark = store.versions(limit=1)[0].id
    store.add_case(CaseRecord(query, (), "not a Head Start task"))
    live = search.live(wait=True)
    store.save_fit(store.revision(), live.digest, scaled(live.params.as_dict(), 0.7), {"status": "fitted"})
    search.live(wait=True)
    plan = store.rollback_plan(mark)
    report = preview_change(search, store.tasks(), store.cases(), list(plan.tasks), list(plan.cases), [query])
    store.rollback(mark)
    search.live(wait=True)
    assert predicted_top(report.queries[0]) == live_top(search, query)
    with app.test_request_context():
        html = render_template("admin/_preview.html", preview=report.as_dict())
    assert "removes one query from the out-of-scope examples" in html and "adds this query" not in html
    assert "the one serving now" in html, "the page says the two sides rank with different fits"
