"""Issue 32 items 1 and 2 as a person meets them: the "why" line under each result in the widget
must be true. Debian's Chromium via Playwright against the real app over HTTP, with the demo's
own fit (as `make run` serves it: the prototype signal is fitted on the test cases) on a fresh
database: no search and no click before the test's own.

1. A correctly spelled word is never explained as a test case's misspelling ("developmental"
   read as "devlopmental"), and a misspelling is explained once ("screning" as "screening", not
   also as "screenings").
2. Each signal is named by its source: the prototype (fitted on the written test cases) is not
   "learned from earlier searches"; "learned from searches" is said only where evidence learned
   from use added to the score (contributions.learned > 0).

The one fake: a page.route that adds a learned contribution to a real response, for the one
check that needs evidence learned from use (a click and a refit: tests/browser/
test_learned_evidence.py shows that path end to end).
"""
from __future__ import annotations

import json
from urllib.parse import parse_qs, urlparse

import pytest

from search.signal import phrases
from tests.browser.test_widget import COMBOBOX
from tests.conftest import fitted_demo_app

PROTOTYPE_PHRASE = "a model of how people ask for each task ranks it here"


@pytest.fixture(scope="module")
def fitted_demo(tmp_path_factory, shared_cache_dir, demo_tasks, demo_cases):
    with fitted_demo_app(tmp_path_factory.mktemp("why-line"), shared_cache_dir, demo_tasks, demo_cases) as app:
        yield app


def searched_for(text: str):
    return lambda r: "/api/search" in r.url and parse_qs(urlparse(r.url).query, keep_blank_values=True).get("q") == [text]


def type_and_read(page, base: str, query: str) -> tuple[dict, dict[str, str]]:
    """Type `query` into the demo page's widget; the API's answer to the whole query and, by task
    id, the why line the widget shows for each of its results."""
    page.goto(base + "/")
    with page.expect_response(searched_for(query)) as answered:
        page.locator(COMBOBOX).press_sequentially(query, delay=30)
    body = answered.value.json()
    page.wait_for_selector(f'[role=listbox][data-search-id="{body["search_id"]}"]', state="attached")
    lines = {}
    for option in page.locator("[role=option][data-task-id]").all():
        lines[option.get_attribute("data-task-id")] = option.locator(".tf-why").text_content()
    assert set(lines) == {row["id"] for row in body["results"]}, (lines, body["results"])
    return body, lines


def assert_signals_named_by_source(body: dict, lines: dict[str, str]) -> None:
    """No line says "learned" where no evidence learned from use added to the result's score."""
    for row in body["results"]:
        line = lines[row["id"]]
        if row["contributions"].get("learned", 0) <= 0:
            assert "learned" not in line.lower(), (row["name"], line, row["contributions"])


def test_a_correctly_spelled_word_is_not_explained_as_a_misspelling(fitted_demo, live_server, page):
    body, lines = type_and_read(page, live_server(fitted_demo), "developmental scr")
    asq = lines["health.asq3-screening"]
    assert "devlopmental" not in " ".join(lines.values()), lines
    assert "“scr” begins “Screening”" in asq and "as “screened”" not in asq, asq
    # this query's lines name the prototype (second strongest for the two screening tasks)
    assert PROTOTYPE_PHRASE in asq, asq
    assert_signals_named_by_source(body, lines)


def test_a_misspelling_is_explained_once(fitted_demo, live_server, page):
    body, lines = type_and_read(page, live_server(fitted_demo), "devlopmental screning")
    # a test case has exactly this query: its two answers are pinned first and say so
    pinned = {"health.asq3-screening", "health.screening-tracker"}
    assert {lines[task_id] for task_id in pinned} == {"The saved answer for this exact search"}
    # every result the correction ranked (its typo evidence added to the score) says so first; a
    # task still on screen from the keystroke before (search.sequence holds it: which ones depends
    # on which keystrokes the widget had answered, so on the machine's speed) may owe nothing to it
    # and says what it does owe (seen under 3 pytest workers: a held task, "close in meaning ...")
    corrected = {row["id"] for row in body["results"] if row["id"] not in pinned
                 and row["contributions"].get("typo", 0) > 0
                 and any(m.get("corrected_to") == "screening" for m in row.get("matched") or ())}
    assert corrected, lines
    assert all(lines[task_id].startswith("Reads “screning” as “screening” · ") for task_id in corrected), lines
    for task_id, line in lines.items():
        assert line.count("“screning” as") <= 1 and "screenings" not in line, (task_id, line)
    assert_signals_named_by_source(body, lines)


@pytest.mark.parametrize("query", ["cacfp paperwork", "cacfp"])
def test_nothing_is_learned_from_searches_on_a_fresh_database(fitted_demo, live_server, page, query):
    """The audit saw "learned from earlier searches" on filler results for "cacfp" before any
    search or click: it labelled the prototype, which the fit learns from the written test cases."""
    services = fitted_demo.extensions["taskfinder"]
    assert services.search.live().index.learned is None       # nothing learned from use here
    body, lines = type_and_read(page, live_server(fitted_demo), query)
    assert all("learned" not in row["contributions"] for row in body["results"])
    assert_signals_named_by_source(body, lines)
    # the prototype is the second strongest reason of some results (the audit's filler); since the
    # typing fit of issue 43 item 1 it weighs nothing on a fragment ("ca"), so a longer text shows it
    if query == "cacfp paperwork":
        assert any(PROTOTYPE_PHRASE in line for line in lines.values()), lines


def test_learned_from_searches_is_said_where_learned_evidence_added_to_the_score(fitted_demo, live_server, page):
    """The real answer, with the first result's learned contribution made the largest of its
    signals (what evidence learned from use reports: search.prefilter.learned_attribution) and
    the second's made 0: only the first says "learned from searches"."""
    query = "cacfp"

    def with_learned(route):
        response = route.fetch()
        body = response.json()
        if body["results"]:   # as the API says a learned contribution: its value and its phrase (search/signal/)
            first = body["results"][0]
            first["contributions"]["learned"] = max(first["contributions"].values()) + 1.0
            first["signal_phrases"]["learned"] = phrases()["learned"]
            for row in body["results"][1:]:
                row["contributions"]["learned"] = 0.0
                row["signal_phrases"].pop("learned", None)
        route.fulfill(response=response, body=json.dumps(body), content_type="application/json")

    page.route("**/api/search?*", with_learned)
    body, lines = type_and_read(page, live_server(fitted_demo), query)
    first, *rest = body["results"]
    assert "learned from searches" in lines[first["id"]], lines[first["id"]]
    assert rest and all("learned" not in lines[row["id"]].lower() for row in rest), lines
