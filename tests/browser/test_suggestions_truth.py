"""Issue 32 item 8, in Chromium against the fitted demo: the widget's "try one of these" chips
never offer a task an out-of-scope test case rules out. The demo's own "weather forecast for
tomorrow" case says Emergency Drills is not it, so no task chip is offered for that query (the
topics are); an out-of-scope case added to the catalog ("custom emoji in slack", whose
rationale rejects Custom Fields) takes Custom Fields off that query's chips as soon as the
index has it."""
from __future__ import annotations

import pytest

from catalog.records import CaseRecord
from tests.browser.test_widget_small_things import search_for
from tests.conftest import fitted_demo_app

SLACK = "custom emoji in slack"


@pytest.fixture
def demo(tmp_path, shared_cache_dir, demo_tasks, demo_cases):
    with fitted_demo_app(tmp_path, shared_cache_dir, demo_tasks, demo_cases) as app:
        yield app


def chips(page) -> list[tuple[str, str]]:
    """(kind, text) of each suggestion chip the widget shows."""
    return page.locator("button.tf-suggestion").evaluate_all(
        "bs => bs.map(b => [b.className.replace('tf-suggestion ', '').replace('tf-suggestion-', ''), b.textContent])")


def test_the_chips_never_offer_a_task_an_out_of_scope_case_rules_out(demo, live_server, page):
    base = live_server(demo)
    page.goto(base + "/")
    search_for(page, "weather forecast for tomorrow", submit=True)   # judged whole (search_for)
    assert page.locator(".tf-empty-title").text_content() == "Nothing matches"   # sure: a case rules it out
    shown = chips(page)
    assert shown and all(kind == "topic" for kind, _text in shown), shown
    assert page.locator("button.tf-suggestion-task").count() == 0

    search_for(page, SLACK, submit=True)
    assert page.locator(".tf-empty-title").text_content() == "Not sure which task you mean"
    assert chips(page)[0] == ["task", "Custom Fields"], "the premise: the chips offer Custom Fields first"

    services = demo.extensions["taskfinder"]
    services.store.add_case(CaseRecord(SLACK, (), "Slack emoji are not a program task; Custom Fields adds fields "
                                                 "to the program's own forms.", "natural_language"))
    services.search.live(wait=True)
    page.goto(base + "/")
    search_for(page, SLACK, submit=True)
    assert page.locator(".tf-empty-title").text_content() == "Nothing matches"
    shown = chips(page)
    assert shown and "Custom Fields" not in [text for _kind, text in shown], shown
    assert page.locator("button.tf-suggestion-task").count() == 0, shown
