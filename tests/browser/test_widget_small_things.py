"""Issue 32 item 10, in a real browser against the real demo (role switcher on, the shipped fit
installed, as `make run` serves it): the homepage's example searches find a right task for the
viewer they are shown to; the "results hidden" line says what is true once a role is picked;
Back from a task page brings the search back; Enter with nothing highlighted opens the first
task; a suggestion that names a task opens that task."""
from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

import pytest

from tests.browser.test_widget import COMBOBOX, option_names, type_query, wait_final
from tests.conftest import fitted_demo_app


@pytest.fixture(scope="module")
def demo(tmp_path_factory, shared_cache_dir, demo_tasks, demo_cases):
    with fitted_demo_app(tmp_path_factory.mktemp("small-things"), shared_cache_dir, demo_tasks, demo_cases,
                         DEMO_ROLE_SWITCHER="1") as app:
        yield app


def shown_examples(page) -> list[str]:
    """The example searches the homepage's lead paragraph offers, as the visitor reads them."""
    return re.findall(r"“([^”]+)”", page.locator(".home-lead").text_content())


def task_ids(page) -> list[str]:
    return page.locator("[role=option][data-task-id]").evaluate_all("els => els.map(e => e.dataset.taskId)")


SETTLE_MS = 700   # widget.js settleMs: the list is final this long after the last keystroke


def search_for(page, query: str, settle_at_once: bool = False, submit: bool = False) -> None:
    """Type `query` and wait for its final list. `settle_at_once` (the page's clock installed:
    page.clock.install()): the widget's settle pause is fast-forwarded instead of waited for,
    so that its timers fire as they would SETTLE_MS later, without the wall-clock wait. `submit`:
    press Enter after it, so that the query is judged whole, whatever list its first letters
    left on screen (a slow machine answers some keystrokes on the way, and a refusal keeps what
    the sequence holds: search.sequence)."""
    box = page.locator(COMBOBOX)
    box.fill("")
    type_query(page, query, delay_ms=5)
    if submit:
        box.press("Enter")
    if settle_at_once:
        page.clock.fast_forward(SETTLE_MS)
    page.wait_for_function("q => { const w = Taskfinder.instances[0];"
                           " return w.list && w.list.query === q && w.list.final; }", arg=query)


# -- (1) the homepage's examples, and the hidden-results line ---------------------------------------
def test_every_example_on_the_homepage_finds_a_right_task_for_its_viewer(demo, live_server, page, demo_tasks,
                                                                         demo_cases):
    base = live_server(demo)
    gold = {case.query: set(case.gold) for case in demo_cases}
    roles_of = {task.id: set(task.roles) for task in demo_tasks}
    page.clock.install()   # ~26 searches: each one's settle pause fast-forwarded (search_for)
    page.goto(base + "/")
    viewers = [""] + page.locator("#demo-role option").evaluate_all("os => os.map(o => o.value).filter(Boolean)")
    assert len(viewers) > 2
    for viewer in viewers:
        page.select_option("#demo-role", viewer)
        examples = shown_examples(page)
        assert len(examples) >= 2, (viewer, examples)
        for example in examples:
            assert example in gold, f"{example!r} (shown to {viewer or 'a visitor'}) is no test case of the demo"
            visible = {t for t in gold[example] if not roles_of[t] or viewer in roles_of[t]}
            assert visible, f"{example!r}: none of its right tasks is visible to {viewer or 'a visitor'}"
            search_for(page, example, settle_at_once=True)
            first = task_ids(page)[0]
            assert first in gold[example], (viewer, example, first)
    page.select_option("#demo-role", "")
    assert "bus driver background check" not in shown_examples(page)


def test_with_a_role_picked_the_hidden_line_does_not_ask_to_choose_a_role(demo, live_server, page):
    base = live_server(demo)
    page.goto(base + "/")
    search_for(page, "background checks")   # the right task is HR's and the director's
    hidden = page.locator(".tf-hidden")
    assert hidden.is_visible() and "choose a role under “Search as”" in hidden.text_content()

    with page.expect_response(lambda r: "/api/search" in r.url) as answered:
        page.select_option("#demo-role", "teacher")
    body = answered.value.json()
    assert body["access"]["credential"] == "verified" and body["hidden_by_role"] >= 1
    page.wait_for_function("() => Taskfinder.instances[0].list && Taskfinder.instances[0].list.final")
    text = hidden.text_content()
    assert hidden.is_visible(), text
    assert "choose a role" not in text
    n = body["hidden_by_role"]
    assert text == (f"{n} result" if n == 1 else f"{n} results") + " hidden — only other roles can see " + \
        ("it" if n == 1 else "them")


# -- (2) Back from a task page ---------------------------------------------------------------------
@pytest.mark.parametrize("how", ["back-button", "back-link"])
def test_back_from_a_task_page_restores_the_query_and_its_results(demo, live_server, page, how):
    base = live_server(demo)
    page.goto(base + "/")
    search_for(page, "kids shots")
    names, ids = option_names(page), task_ids(page)
    box = page.locator(COMBOBOX)
    box.press("End")
    for _ in range(page.locator("[role=option][data-completion]").count() + 1):
        box.press("ArrowDown")
    with page.expect_navigation(url=re.compile(re.escape(base) + "/.+")):
        box.press("Enter")
    if how == "back-button":
        page.go_back()
    else:
        with page.expect_navigation(url=base + "/"):
            page.get_by_role("link", name="Back to the search").click()
    page.wait_for_function("() => Taskfinder.instances[0].list && Taskfinder.instances[0].list.final")
    assert box.input_value() == "kids shots"
    assert task_ids(page) == ids and option_names(page) == names
    assert box.get_attribute("aria-expanded") == "true" and box.get_attribute("aria-activedescendant") is None
    assert page.evaluate("document.activeElement.getAttribute('role')") == "combobox"


def test_a_cleared_search_is_not_brought_back(demo, live_server, page):
    base = live_server(demo)
    page.goto(base + "/")
    search_for(page, "kids shots")
    box = page.locator(COMBOBOX)
    box.press("Escape")
    box.press("Escape")   # cleared
    page.goto(base + "/health/immunizations")
    page.go_back()
    page.wait_for_timeout(500)
    assert box.input_value() == "" and box.get_attribute("aria-expanded") == "false"


# -- (3) Enter with nothing highlighted --------------------------------------------------------------
def test_enter_with_nothing_highlighted_opens_the_first_task(demo, live_server, page):
    base = live_server(demo)
    page.goto(base + "/")
    search_for(page, "kids shots")
    box = page.locator(COMBOBOX)
    assert box.get_attribute("aria-activedescendant") is None
    first = page.locator("[role=option][data-task-id]").first
    assert first.get_attribute("data-task-id") == "health.immunizations"
    with page.expect_navigation(url=base + "/health/immunizations"):
        box.press("Enter")


def test_enter_before_the_list_came_searches_at_once_and_opens_nothing(demo, live_server, page):
    base = live_server(demo)
    page.clock.install()
    page.goto(base + "/")
    seen: list[dict] = []
    page.on("request", lambda r: "/api/search" in r.url and seen.append(parse_qs(urlparse(r.url).query)))
    box = page.locator(COMBOBOX)
    # the page's clock stands still from here: the 120 ms type-ahead cannot fire before Enter,
    # however slowly a loaded machine runs the two steps (it did: the list came first)
    page.clock.pause_at(page.evaluate("Date.now()") + 1000)
    box.fill("kids shots")
    box.press("Enter")
    page.clock.resume()
    wait_final(page)
    assert page.url == base + "/"
    assert seen and seen[0]["typing"] == ["0"] and seen[0]["q"] == ["kids shots"]
    assert option_names(page) and box.get_attribute("aria-expanded") == "true"


# -- (4) suggestion chips ---------------------------------------------------------------------------
def test_a_suggestion_that_names_a_task_opens_that_task(demo, live_server, page, demo_tasks):
    base = live_server(demo)
    url_of = {task.name: task.url for task in demo_tasks}
    page.goto(base + "/")
    search_for(page, "pizza party", submit=True)
    assert page.locator(".tf-empty-title").text_content() == "Not sure which task you mean"
    chip = page.locator("button.tf-suggestion-task").first
    name = chip.text_content()
    assert name in url_of
    with page.expect_navigation(url=base + url_of[name]):
        chip.click()
    assert page.locator("h1").text_content() == name


def test_a_topic_suggestion_still_searches_for_its_text(demo, live_server, page):
    base = live_server(demo)
    page.goto(base + "/")
    search_for(page, "🚌🚌🚌")
    chip = page.locator("button.tf-suggestion:not(.tf-suggestion-task)").first
    text = chip.text_content()
    with page.expect_response(lambda r: "/api/search" in r.url and "typing=0" in r.url):
        chip.click()
    wait_final(page)
    assert page.url == base + "/" and page.locator(COMBOBOX).input_value() == text
