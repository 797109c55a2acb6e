"""Type-ahead as a person meets it (issue 31): the demo's headline queries typed letter by letter
into the widget, in a real browser (Debian's Chromium via Playwright) against the real app over
HTTP, with the demo's own fit (as `make run` serves it: typing weights, typing threshold, tail
cut). After every keystroke from the letter named on, the widget shows the right task, not "no
confident match". Figures: docs/prefix-search.md."""
from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from tests.browser.test_widget import COMBOBOX
from tests.conftest import fitted_demo_app

# (query, the tasks that are right for it, the letter from which one of them must be shown)
HEADLINES = [
    ("eligibility", {"ersea.eligibility-determination"}, 3),
    ("immunization records", {"health.immunizations"}, 3),
    ("hearing and vision screening", {"health.hearing-screening"}, 3),
    # "dev", "deve" and the whole word "development" read as professional development first; the
    # screening tasks lead once the word is "developmenta" (docs/prefix-search.md)
    ("developmental screening", {"health.asq3-screening", "health.screening-tracker"}, 12),
]


@pytest.fixture(scope="module")
def fitted_demo(tmp_path_factory, shared_cache_dir, demo_tasks, demo_cases):
    with fitted_demo_app(tmp_path_factory.mktemp("typeahead-browser"), shared_cache_dir, demo_tasks, demo_cases) as app:
        yield app


def searched_for(text: str):
    return lambda r: "/api/search" in r.url and parse_qs(urlparse(r.url).query, keep_blank_values=True).get("q") == [text]


@pytest.mark.parametrize("query, right, from_letter", HEADLINES, ids=[h[0] for h in HEADLINES])
def test_the_right_task_is_shown_while_the_query_is_typed(fitted_demo, live_server, page, query, right, from_letter):
    base = live_server(fitted_demo)
    page.goto(base + "/")
    box = page.locator(COMBOBOX)
    box.click()
    box.press_sequentially(query[:from_letter - 1], delay=20)
    for n in range(from_letter, len(query) + 1):
        typed = query[:n]
        with page.expect_response(searched_for(typed)) as answered:
            box.press(query[n - 1])
        body = answered.value.json()
        assert not body["no_confident_match"], typed
        assert right & {row["id"] for row in body["results"][:5]}, (typed, [r["name"] for r in body["results"]])
        # the widget rendered this very answer, and shows one of the right tasks in it
        page.wait_for_selector(f'[role=listbox][data-search-id="{body["search_id"]}"]', state="attached")
        shown = page.locator("[role=option][data-task-id]").evaluate_all("els => els.map(e => e.dataset.taskId)")
        assert right & set(shown[:5]), (typed, shown)


def test_a_fragment_shows_completions_and_tasks(fitted_demo, live_server, page):
    """docs/typeahead.png: what a person sees after five letters."""
    from tests.browser.conftest import screenshot

    base = live_server(fitted_demo)
    page.set_viewport_size({"width": 880, "height": 640})
    page.goto(base + "/")
    with page.expect_response(searched_for("immun")) as answered:
        page.locator(COMBOBOX).press_sequentially("immun", delay=40)
    body = answered.value.json()
    page.wait_for_selector(f'[role=listbox][data-search-id="{body["search_id"]}"]', state="attached")
    assert body["results"][0]["id"] == "health.immunizations"
    assert any(c["text"] == "Immunization Records" for c in body["completions"])
    assert page.locator("[role=option][data-completion]").count() == len(body["completions"])
    # the "why" line names the typing evidence only where it contributed
    why = page.locator("[role=option][data-task-id] .tf-why").first.text_content()
    typing = {name: body["results"][0]["contributions"].get(name, 0) for name in ("typed", "begins")}
    assert ("begin" in why) <= any(value > 0 for value in typing.values()), (why, typing)
    screenshot(page, "typeahead.png")
