"""The demo as a new user meets it, in a real browser (issue 19): the role switcher and the
"results hidden" line, no re-rank request without an LLM, task links that land on a page, an
HTML page-not-found, acronym categories, and the compressed widget script. Unit-level checks of
the same endpoints: tests/test_demo_mode.py. Writes docs/widget.png (the README's screenshot)."""
from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from tests.browser.conftest import screenshot
from tests.browser.test_widget import COMBOBOX, completion_count, option_names, type_query, wait_final
from tests.conftest import build_app, close_app, make_settings


@pytest.fixture(scope="module")
def switcher(tmp_path_factory, shared_cache_dir, demo_tasks, demo_cases):
    """The demo as `make run` serves it: demo homepage with the role switcher, embeddings on, no LLM."""
    app = build_app(make_settings(tmp_path_factory.mktemp("switcher"), shared_cache_dir, DEMO_ROLE_SWITCHER="1"),
                    demo_tasks, demo_cases)
    app.extensions["taskfinder"].search.live(wait=True)
    yield app
    close_app(app)


def searches(page) -> list[dict]:
    seen: list[dict] = []
    page.on("request", lambda r: "/api/search" in r.url and seen.append(parse_qs(urlparse(r.url).query)))
    return seen


def test_a_visitor_sees_how_many_results_are_hidden_and_a_role_shows_them(switcher, live_server, page):
    base = live_server(switcher)
    page.set_viewport_size({"width": 880, "height": 640})   # the README's screenshot: small
    page.goto(base + "/")
    type_query(page, "bus driver background check")
    wait_final(page)
    anonymous = option_names(page)
    assert "Background Checks" not in anonymous and "Driver Qualifications" not in anonymous
    hidden = page.locator(".tf-hidden")
    assert hidden.is_visible()
    n = int(hidden.text_content().split()[0])
    assert n >= 1
    assert hidden.text_content().endswith("hidden — choose a role under “Search as” to see " + ("it" if n == 1 else "them"))

    with page.expect_response(lambda r: "/api/search" in r.url) as answered:
        page.select_option("#demo-role", "hr")
    assert answered.value.request.headers["authorization"].startswith("Bearer ")
    assert answered.value.json()["access"]["credential"] == "verified"
    page.locator(COMBOBOX).focus()
    page.wait_for_function("() => [...document.querySelectorAll('[role=option] .tf-name')]"
                           ".some(e => e.textContent === 'Background Checks')")
    wait_final(page)
    as_hr = option_names(page)
    assert {"Background Checks", "Driver Qualifications"} <= set(as_hr[:5])
    assert page.locator(".tf-hidden").is_hidden()
    page.locator(COMBOBOX).press("ArrowDown")
    screenshot(page, "widget.png")


def test_without_an_llm_the_widget_sends_no_rerank_request(switcher, live_server, page):
    base = live_server(switcher)
    seen = searches(page)
    page.goto(base + "/")
    type_query(page, "kids shots")
    wait_final(page)
    page.wait_for_timeout(900)   # past the 700 ms pause that used to send rerank=1
    page.locator(COMBOBOX).press("Enter")
    page.wait_for_timeout(300)
    assert seen and all(query["rerank"] == ["0"] for query in seen), seen
    assert page.locator(".tf-notice").is_hidden()   # and nothing pretends re-ranking was tried


def test_a_result_opens_a_task_page_and_an_unknown_page_is_html(switcher, live_server, page):
    base = live_server(switcher)
    page.goto(base + "/")
    type_query(page, "cacfp meal count")
    wait_final(page)
    names = option_names(page)
    position = names.index("CACFP Meal Count")
    for _ in range(completion_count(page) + position + 1):
        page.locator(COMBOBOX).press("ArrowDown")
    with page.expect_navigation(url=f"{base}/nutrition/cacfp-meal-count"):
        page.locator(COMBOBOX).press("Enter")
    assert page.locator("h1").text_content() == "CACFP Meal Count"
    assert "no such endpoint" not in page.content()
    missing = page.goto(base + "/no/such/page")
    assert missing.status == 404 and page.locator("h1").text_content() == "Page not found"
    api = page.goto(base + "/api/nope")
    assert api.status == 404 and api.headers["content-type"].startswith("application/json")


def test_an_acronym_category_keeps_its_capitals(switcher, live_server, page):
    base = live_server(switcher)
    page.goto(base + "/")
    type_query(page, "eligibility determination")
    wait_final(page)
    categories = page.locator("[role=option] .tf-category").all_text_contents()
    assert "ERSEA" in categories and "Ersea" not in categories


def test_the_browser_gets_widget_js_compressed(switcher, live_server, page):
    base = live_server(switcher)
    with page.expect_response(lambda r: r.url.endswith("/widget.js")) as script:
        page.goto(base + "/")
    headers = script.value.headers
    assert headers.get("content-encoding") in {"br", "gzip"} and "max-age=300" in headers["cache-control"]
    assert page.evaluate("typeof window.Taskfinder.mount") == "function"
