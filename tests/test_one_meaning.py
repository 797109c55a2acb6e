"""One meaning for a request (issue 45): a test case's text is read the same way wherever it is
ranked, through the same pipeline factory (search.pipeline.make_pipeline).

The bug this guards: test cases of 8 characters or fewer (24 of the demo's 258) were "still
being typed" in the admin's preview and in the fit's cross-validation (no `typing`: the
prefilter's reading by length) but submitted in the evaluation replay ("Waitlist": typing class
3 vs 0; its #3 result differed). A test case is a query a person submitted
(search.request.SearchRequest.of_case), so each of the four parts that rank one, serving as the
admin's case page asks it, the change preview, the fit's CV and the evaluation, must hand the
pipeline the same request meaning and get the same AnalysedQuery reading of it.
"""
from __future__ import annotations

import pytest

from catalog.splits import holdout_split
from search.pipeline import Pipeline
from search.request import EVERYONE, Meaning, SearchRequest

SHORT = ("Waitlist", "ASQ")   # read as unfinished by length (typing classes 3 and 1) when nobody says


@pytest.fixture
def readings(monkeypatch):
    """text -> [(where, typing class, finished)] of every query the pipeline analyses."""
    seen: dict[str, list[tuple[str, int, bool]]] = {}
    where = {"now": None}
    real = Pipeline.analyse

    def spy(self, request):
        analysed = real(self, request)
        seen.setdefault(request.query, []).append((where["now"], analysed.unfinished, analysed.finished))
        return analysed

    monkeypatch.setattr(Pipeline, "analyse", spy)
    return seen, where


def test_a_test_case_is_a_submitted_query_and_a_prefix_a_typed_one():
    assert SearchRequest.of_case("Waitlist").meaning == Meaning(finished=False, typing=False)
    assert SearchRequest.of_case("Waitlist").viewer == EVERYONE
    assert SearchRequest.typed("Waitl").meaning == Meaning(finished=False, typing=None)
    typed = SearchRequest.typed("wait ")
    assert typed.query == "wait" and typed.meaning == Meaning(finished=True, typing=None)


def test_the_same_test_case_means_the_same_in_serving_preview_cv_and_evaluation(demo_app, demo_tasks, demo_cases,
                                                                                readings):
    from admin.editor import served_now
    from admin.preview import preview_change
    from evaluation.replay import heldout_index, heldout_queries, replay_pipeline
    from search.fitting import FitContext, cv_queries

    seen, where = readings
    service = demo_app.extensions["taskfinder"].search
    cases = [c for c in demo_cases if c.query in SHORT]
    assert len(cases) == len(SHORT)

    where["now"] = "serving (the case page)"
    with demo_app.app_context():
        for case in cases:
            served_now(case.query)
    where["now"] = "preview"
    store = service.source
    tasks, stored = store.tasks(include_inactive=True), store.cases()
    preview_change(service, tasks, stored, tasks, stored, [c.query for c in cases])
    where["now"] = "cv"
    cv_queries(FitContext(service.settings, demo_tasks, demo_cases, None, max_queries=None))
    where["now"] = "evaluation"
    train, _ = holdout_split(demo_cases, 0.2, 42)
    params = service.live().params
    pipeline = replay_pipeline(service.settings, heldout_index(service.settings, demo_tasks, train, None, params),
                               params, None)
    heldout_queries(pipeline, cases)

    for case in cases:
        readings_of = seen[case.query]
        assert {place for place, _, _ in readings_of} == {"serving (the case page)", "preview", "cv", "evaluation"}
        assert {(unfinished, finished) for _, unfinished, finished in readings_of} == {(0, False)}, readings_of
