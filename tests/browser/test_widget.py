"""The search widget in a real browser (Debian's Chromium via Playwright) against the real app
served over HTTP: the demo homepage at / embeds /widget.js exactly as a host page would.

Fakes only inject faults: a WSGI wrapper that delays some searches (a slow older response), and
page.route to stall or cut off the backend, to mark a real response degraded, and to serve a host
page with other data-* attributes. /api/events is the real endpoint (page.route only reads what
the widget posted), and the acceptance test reads the click back on the admin analytics page.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from catalog.records import TaskRecord
from tests.conftest import ADMIN_PASSWORD, FAST_HASHER, build_app, close_app, make_settings

ROOT = Path(__file__).resolve().parents[2]
AXE_JS = Path(os.environ.get("AXE_CORE_JS") or ROOT / ".axe" / "node_modules" / "axe-core" / "axe.min.js")
XSS_NAME = "<img src=x onerror=alert(1)>"
COMBOBOX = "[role=combobox]"


# -- helpers ----------------------------------------------------------------------------------------
def record_csp_violations(page):
    """Collect Content-Security-Policy violations of every document the page loads."""
    page.add_init_script("window.__csp = []; document.addEventListener('securitypolicyviolation',"
                         " e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));")


def capture_events(page) -> list[dict]:
    """Every event posted to /api/events, parsed, after the real endpoint accepted it (202)."""
    posted: list[dict] = []

    def handle(route):
        request = route.request
        response = route.fetch()      # the real endpoint answers; the test only reads what was sent
        assert response.status == 202, response.text()
        # listed only once accepted (queued for the analytics writer): a test that waits for an
        # event here and then flushes the writer finds it written (listed before, the flush could
        # run first: the click-through read 0% once on a loaded 2-core machine)
        if request.method == "POST" and request.post_data:
            body = json.loads(request.post_data)
            posted.extend({**event, "_session": body["session_id"]} for event in body["events"])
        route.fulfill(response=response)

    page.route("**/api/events", handle)
    return posted


def type_query(page, text: str, delay_ms: int = 35) -> None:
    box = page.locator(COMBOBOX)
    box.click()
    box.press_sequentially(text, delay=delay_ms)


def wait_final(page, timeout_ms: int = 15_000) -> None:
    page.wait_for_selector(".tf-widget[data-final=true]", state="attached", timeout=timeout_ms)


def option_names(page) -> list[str]:
    return page.locator("[role=option] .tf-name").all_text_contents()


def completion_count(page) -> int:
    """The suggested whole queries listed above the tasks (the arrow keys reach them first)."""
    return page.locator("[role=option][data-completion]").count()


def wait_until(page, predicate, timeout_s: float = 10.0):
    """Poll `predicate` while Playwright keeps dispatching events (route handlers, listeners):
    a plain time.sleep would block them."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        page.wait_for_timeout(50)
    raise AssertionError("condition not met in time")


def host_page(page, base: str, path: str = "/host.html", page_lang: str = "en", **attributes) -> str:
    """Serve a host page (same origin as the app; its `<html lang>`: `page_lang`) that embeds the
    widget with these data-* attributes, under the same CSP as the homepage: no inline script or style."""
    attrs = " ".join(f'data-{name.replace("_", "-")}="{value}"' for name, value in attributes.items())
    html = (f'<!doctype html><html lang="{page_lang}"><head><meta charset="utf-8"><title>Host</title>'
            f'<link rel="icon" href="data:,"><link rel="stylesheet" href="{base}/widget.css"></head>'
            f'<body><main><div id="finder"></div></main>'
            f'<script src="{base}/widget.js" data-endpoint="{base}/api" data-target="#finder" {attrs} defer></script>'
            f'</body></html>')
    csp = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src data:"
    page.route(base + path, lambda route: route.fulfill(status=200, content_type="text/html", body=html,
                                                        headers={"Content-Security-Policy": csp}))
    return base + path


class DelayedSearches:
    """WSGI fault injection: /api/search requests whose query starts with `prefix` are answered
    `seconds` late (by the real app); everything else passes straight through."""

    def __init__(self, app, prefix: str, seconds: float):
        self.app, self.prefix, self.seconds = app, prefix, seconds

    def __call__(self, environ, start_response):
        query = parse_qs(environ.get("QUERY_STRING", "")).get("q", [""])[0]
        if environ.get("PATH_INFO") == "/api/search" and query.startswith(self.prefix):
            time.sleep(self.seconds)
        return self.app(environ, start_response)


@pytest.fixture(scope="module")
def demo(demo_app):
    """The demo app with its index built (embedding the catalog takes a while on first use)."""
    demo_app.extensions["taskfinder"].search.live(wait=True)
    return demo_app


@pytest.fixture
def tracked(tmp_path, shared_cache_dir, demo_tasks, demo_cases):
    """The demo app on a database of its own, whose analytics start empty, with a viewer `vera`."""
    settings = make_settings(tmp_path, shared_cache_dir, SECRET_KEY="k" * 40, SESSION_COOKIE_SECURE="0")
    app = build_app(settings, demo_tasks, demo_cases)
    accounts = app.extensions["taskfinder"].accounts
    accounts.hasher = FAST_HASHER
    accounts.create_user("vera", ADMIN_PASSWORD, "viewer", actor="cli:test")
    app.extensions["taskfinder"].search.live(wait=True)
    yield app
    app.extensions["taskfinder_analytics"].close()


@pytest.fixture(scope="module")
def tricky_app(tmp_path_factory, shared_cache_dir):
    """A small catalog (no embeddings: fast) with a task named like an XSS attack, whose URL is a
    javascript: URL, beside ordinary ones."""
    tasks = [
        TaskRecord(id="zz.xss", name=XSS_NAME, help='"><script>alert(2)</script> onerror handler',
                   category="zz", url="javascript:alert(3)"),
        TaskRecord(id="h.imm", name="Immunization Records", help="Record vaccines and exemptions.", category="health",
                   url="/health/immunizations"),
        TaskRecord(id="t.bus", name="Bus Routes", help="Plan routes and stops.", category="transportation",
                   url="/transportation/routes"),
    ]
    settings = make_settings(tmp_path_factory.mktemp("tricky"), shared_cache_dir, EMBEDDINGS_ENABLED="0")
    return build_app(settings, tasks, [])


# -- the acceptance path ----------------------------------------------------------------------------
def test_typo_query_finds_screening_keyboard_opens_it_and_the_click_is_recorded(tracked, live_server, page):
    base = live_server(tracked)
    page.set_viewport_size({"width": 880, "height": 600})   # the README's screenshot: small
    record_csp_violations(page)
    events = capture_events(page)
    home = page.goto(base + "/")
    assert "script-src 'self'" in home.headers["content-security-policy"]

    # no LLM configured: the instant list of the whole query is the final one (no rerank=1 is sent)
    with page.expect_response(lambda r: "/api/search" in r.url and "q=devlopmental+scrn&" in r.url) as final:
        type_query(page, "devlopmental scrn")
    wait_final(page)
    body = final.value.json()
    names = option_names(page)
    assert names == [row["name"] for row in body["results"]][:len(names)]
    screening = next(i for i, name in enumerate(names[:2]) if name in {"ASQ-3 Screening", "45-Day Screening Tracker"})
    target = body["results"][screening]

    box = page.locator(COMBOBOX)
    for _ in range(completion_count(page) + screening + 1):
        box.press("ArrowDown")
    option = page.locator(f"[role=option][data-task-id='{target['id']}']")
    assert box.get_attribute("aria-activedescendant") == option.get_attribute("id")
    assert option.get_attribute("aria-selected") == "true"
    search_id = page.locator("[role=listbox]").get_attribute("data-search-id")
    assert search_id == body["search_id"]

    with page.expect_navigation(url=f"{base}{target['url']}"):
        box.press("Enter")
    clicks = wait_until(page, lambda: [e for e in events if e["type"] == "click"])
    assert clicks == [{"type": "click", "search_id": search_id, "task_id": target["id"], "position": screening + 1,
                       "_session": clicks[0]["_session"]}]
    impressions = [e for e in events if e["type"] == "impression"]
    assert [(e["search_id"], e["query"]) for e in impressions] == [(search_id, "devlopmental scrn")]
    assert impressions[0]["task_ids"] == [row["id"] for row in body["results"]][:8]

    page.go_back()   # back on the search page: the time away is the dwell, and it is a return
    returned = wait_until(page, lambda: [e for e in events if e["type"] in {"dwell", "return"}])
    kinds = sorted(e["type"] for e in wait_until(page, lambda: len(returned) >= 2 and returned))
    assert kinds == ["dwell", "return"]
    assert all(e["search_id"] == search_id and e["task_id"] == target["id"] for e in returned)
    assert next(e for e in returned if e["type"] == "dwell")["dwell_ms"] >= 0
    assert len({e["_session"] for e in events}) == 1
    assert page.evaluate("window.__csp") == []

    # The click reaches the analytics: the keystrokes of "devlopmental scrn" are one search, clicked
    # once at the position chosen above. The page reads today's roll-up, which the writer thread
    # makes at its first flush and then every ANALYTICS_ROLLUP_INTERVAL_S (300 s): on a loaded
    # 2-core machine that first flush came between the search and the click (the page read 1
    # search, 0% click-through: 2026-11-30, the slow AMD kind), so the test writes and rolls up
    # what was sent before it reads the page.
    recorder = tracked.extensions["taskfinder_analytics"]
    recorder.flush()
    recorder.rollup(force=True)
    page.goto(f"{base}/admin/analytics/?days=7")
    page.fill("input[name=username]", "vera")
    page.fill("input[name=password]", ADMIN_PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/admin/analytics/?days=7")
    summary = {dt: dd for dt, dd in zip(page.locator("dl dt").all_text_contents(),
                                        page.locator("dl dd").all_text_contents())}
    assert summary["Searches"] == "1"
    assert summary["Click-through rate"].startswith("100"), summary
    assert float(summary["Average click position"]) == screening + 1


@pytest.fixture(scope="module")
def with_llm(tmp_path_factory, shared_cache_dir, demo_tasks, demo_cases):
    """The demo catalog with an LLM configured (an address nothing listens on: every re-rank
    fails fast and the quick list is kept), so the API says re-ranking is available."""
    settings = make_settings(tmp_path_factory.mktemp("with-llm"), shared_cache_dir, EMBEDDINGS_ENABLED="0",
                             LLM_BASE_URL="http://127.0.0.1:9/v1")
    return build_app(settings, demo_tasks, demo_cases)


def test_typing_shows_instant_results_before_the_reranked_list(with_llm, live_server, page):
    base = live_server(with_llm)
    page.goto(base + "/")
    seen = []
    page.on("request", lambda r: "/api/search" in r.url and seen.append(parse_qs(urlparse(r.url).query)))
    type_query(page, "eligibility determination")
    wait_final(page)
    assert seen[0]["rerank"] == ["0"] and seen[-1]["rerank"] == ["1"]
    assert seen[-1]["q"] == ["eligibility determination"] and seen[-1]["session"][0]
    # debounced: far fewer requests than keystrokes
    assert len(seen) < len("eligibility determination") / 2
    assert page.locator("[role=option]").count() >= 1
    assert page.locator(".tf-why").first.text_content().strip()


@pytest.mark.parametrize("llm", [False, True], ids=["no-llm", "llm"])
def test_a_first_answer_slower_than_the_pause_decides_whether_to_ask_for_the_reranked_list(
        demo, with_llm, live_server, page, llm):
    """The first answer of a page says whether the server can re-rank (rerank_available). When it
    comes after the 700 ms pause (a busy server), the pause must not guess: without an LLM no
    rerank=1 request is ever sent (failed before: the pause asked for it while the answer was
    still unknown), and with one the re-ranked list is asked for once the instant answer came."""
    base = live_server(DelayedSearches(with_llm if llm else demo, prefix="kids", seconds=1.2))
    seen = []
    page.on("request", lambda r: "/api/search" in r.url and seen.append(parse_qs(urlparse(r.url).query)))
    page.goto(base + "/")
    type_query(page, "kids shots", delay_ms=0)
    wait_final(page)
    page.wait_for_timeout(300)
    reranked = [query for query in seen if query["rerank"] == ["1"]]
    if llm:
        assert [query["q"] for query in reranked] == [["kids shots"]], seen
    else:
        assert seen and reranked == [], seen


def test_matched_words_are_highlighted_as_marks(demo, live_server, page):
    base = live_server(demo)
    page.goto(base + "/")
    type_query(page, "immunization records")
    wait_final(page)
    marks = [m.lower() for m in page.locator("[role=option][data-task-id]").first.locator("mark").all_text_contents()]
    assert "immunization" in marks


# -- safety: text stays text -----------------------------------------------------------------------
def test_a_task_named_like_markup_renders_as_text_and_its_javascript_url_never_opens(tricky_app, live_server, page):
    base = live_server(tricky_app)
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(base + "/")
    type_query(page, "img onerror")
    wait_final(page)
    option = page.locator("[role=option][data-task-id='zz.xss']")
    assert option.locator(".tf-name").text_content() == XSS_NAME
    assert "<script>alert(2)</script>" in option.locator(".tf-help").text_content()
    assert page.locator(".tf-widget img, .tf-widget script").count() == 0
    for _ in range(completion_count(page) + 1):   # past the suggested queries (its name is one) to the task
        page.locator(COMBOBOX).press("ArrowDown")
    page.locator(COMBOBOX).press("Enter")
    page.wait_for_timeout(300)
    assert page.url == base + "/"
    assert page.locator(".tf-notice").text_content() == "This task has no link."
    assert dialogs == []


# -- empty state ------------------------------------------------------------------------------------
def test_no_confident_match_shows_suggestions_that_search_when_clicked(demo, live_server, page):
    base = live_server(demo)
    page.goto(base + "/")
    type_query(page, "🚌🚌🚌")
    wait_final(page)
    assert page.locator(".tf-empty-title").text_content() == "Nothing matches"   # no word: sure
    assert page.locator(COMBOBOX).get_attribute("aria-expanded") == "false"   # no listbox shown
    suggestion = page.locator("button.tf-suggestion").first
    text = suggestion.text_content()
    assert text == "health"   # the demo's most common category: the topic fallback
    with page.expect_response(lambda r: "/api/search" in r.url and f"q={text}" in r.url):
        suggestion.click()
    wait_final(page)
    assert page.locator(COMBOBOX).input_value() == text
    assert page.locator("[role=option]").count() > 0
    assert page.locator(".tf-empty").is_hidden()


# -- faults: stalled, down, degraded, stale -----------------------------------------------------------
def test_a_stalled_backend_shows_a_spinner_then_a_slow_notice_then_unavailable(demo, live_server, page):
    base = live_server(demo)
    stalled = []
    page.route("**/api/search**", lambda route: stalled.append(route))   # never answered
    url = host_page(page, base, stall_ms=300, slow_ms=1000, timeout_ms=2500, rerank_timeout_ms=2500)
    page.goto(url)
    type_query(page, "immunization")
    page.wait_for_selector(".tf-widget.tf-busy .tf-spinner", state="visible", timeout=3000)
    page.wait_for_selector(".tf-notice-slow", timeout=3000)
    assert "taking longer" in page.locator(".tf-notice").text_content()
    page.wait_for_selector(".tf-notice-error", timeout=6000)
    assert page.locator(".tf-notice").text_content() == "Search is unavailable right now. Please try again in a moment."
    assert page.locator("[role=status]").text_content() == page.locator(".tf-notice").text_content()
    assert not page.locator(".tf-widget").evaluate("e => e.classList.contains('tf-busy')")
    assert stalled   # the stall really was on the wire


def test_a_backend_that_is_down_says_so_at_once(demo, live_server, page):
    base = live_server(demo)
    page.route("**/api/search**", lambda route: route.abort("connectionrefused"))
    page.goto(base + "/")
    type_query(page, "immunization")
    page.wait_for_selector(".tf-notice-error", timeout=3000)
    assert "unavailable" in page.locator(".tf-notice").text_content()


def test_a_degraded_response_is_shown_with_its_message(demo, live_server, page):
    base = live_server(demo)

    def degrade(route):
        response = route.fetch()
        body = response.json()
        body["degraded"] = ["embeddings_unavailable"]
        route.fulfill(response=response, json=body)

    page.route("**/api/search**", degrade)
    page.goto(base + "/")
    type_query(page, "immunization")
    wait_final(page)
    assert page.locator("[role=option]").count() > 0
    assert "reduced mode" in page.locator(".tf-notice-degraded").text_content()


@pytest.mark.parametrize("abortable", [True, False], ids=["abort-controller", "sequence-numbers-only"])
def test_a_slow_older_response_never_replaces_a_newer_one(demo, live_server, page, abortable):
    """The older query is answered 2 s late by the real app. With AbortController the widget
    cancels it; without one (an older browser, simulated) the late answer arrives and is ignored."""
    base = live_server(DelayedSearches(demo, prefix="bus", seconds=2.0))
    if not abortable:
        page.add_init_script("window.AbortController = undefined;")
    late = []
    page.on("requestfinished", lambda r: "q=bus" in r.url and late.append("finished"))
    page.on("requestfailed", lambda r: "q=bus" in r.url and late.append("failed"))
    page.goto(base + "/")
    with page.expect_request(lambda r: "q=bus" in r.url):
        type_query(page, "bus")
    box = page.locator(COMBOBOX)
    box.fill("")
    with page.expect_response(lambda r: "q=immunization&" in r.url):
        type_query(page, "immunization")
    wait_final(page)
    newer = option_names(page)
    assert newer and "Immunization Records" in newer[:2]
    wait_until(page, lambda: late, timeout_s=6)   # the slow answer is done (arrived, or cancelled)
    page.wait_for_timeout(200)
    assert late[0] == ("failed" if abortable else "finished")
    assert option_names(page) == newer
    assert box.input_value() == "immunization"


# -- host attributes ---------------------------------------------------------------------------------
def test_a_host_role_token_goes_in_the_authorization_header_on_the_same_origin(demo, live_server, page):
    base = live_server(demo)
    page.goto(host_page(page, base, role_token="host.token", k=3, rerank="off"))
    with page.expect_request(lambda r: "/api/search" in r.url) as sent:
        type_query(page, "immunization")
    request = sent.value
    assert request.headers.get("authorization") == "Bearer host.token"
    assert "role_token" not in request.url and "k=3" in request.url and "rerank=0" in request.url
    wait_final(page)   # re-ranking off: the instant list becomes final after the pause
    assert page.locator("[role=option][data-task-id]").count() == 3   # an invalid token still sees unrestricted tasks


def test_the_widget_sends_the_host_page_s_language_and_a_spanish_word_is_read_as_spanish(demo, live_server, page):
    """`lang`: the host page's `<html lang>` ("es_MX" written as the tag "es-MX"), or the host's
    `data-lang`; a page whose lang is no language tag sends none (the API would refuse it). On
    the Spanish page "lista" is not read as a misspelling of "list" (on the English one it is)."""
    base = live_server(demo)
    whys = {}
    for page_lang, attributes, sent in (("es_MX", {}, ["es-MX"]), ("en", {"lang": "pt-BR"}, ["pt-BR"]),
                                        ("not a tag", {}, None), ("en", {}, ["en"])):
        seen = []

        def record(request, seen=seen):
            if "/api/search" in request.url:
                seen.append(parse_qs(urlparse(request.url).query))
        page.on("request", record)
        page.goto(host_page(page, base, page_lang=page_lang, rerank="off", **attributes))
        type_query(page, "lista")
        wait_final(page)
        page.remove_listener("request", record)
        assert seen and all(params.get("lang") == sent for params in seen), (page_lang, attributes, seen)
        whys[page_lang] = " ".join(page.locator("[role=option] .tf-why").all_text_contents())
    assert "“lista” as “list”" in whys["en"]          # the premise: English reads it as a typo
    assert "“lista”" not in whys["es_MX"]


def test_a_completion_in_another_language_is_marked_with_its_language(tmp_path, shared_cache_dir, live_server, page):
    """WCAG 3.1.2 (language of parts): each suggested query's text carries the `lang` the API
    says it is written in, so a Spanish alias on an English page is read out in Spanish, and it
    comes after the English suggestion ("eval" read as English; search.completions)."""
    tasks = (TaskRecord("h.hear", "Hearing Screening", help="Record hearing screening results.",
                        aliases=("Evaluación de la audición",)),
             TaskRecord("d.eval", "Evaluation Status", help="Where each disability evaluation stands."))
    app = build_app(make_settings(tmp_path, shared_cache_dir, EMBEDDINGS_ENABLED="0"), tasks, [])
    try:
        app.extensions["taskfinder"].search.live(wait=True)
        page.goto(host_page(page, live_server(app), rerank="off"))
        type_query(page, "eval")
        wait_final(page)
        texts = page.locator("[role=option][data-completion] .tf-completion-text")
        assert texts.all_text_contents() == ["Evaluation Status", "Evaluación de la audición"]
        assert [texts.nth(i).get_attribute("lang") for i in range(2)] == ["en", "es"]
    finally:
        close_app(app)


def test_the_events_of_a_search_go_with_its_role_token(demo, live_server, page):
    """The host's role token travels with the events of the search it was sent with (a header on
    a same-origin fetch, `role_token` on a beacon, which cannot set headers): the server counts a
    verified person's sessions apart from the rest of their office's address (analytics.sources)."""
    base = live_server(demo)
    sent: list[tuple[str, str | None, list[str]]] = []

    def handle(route):
        request = route.request
        kinds = [e["type"] for e in json.loads(request.post_data)["events"]] if request.post_data else []
        sent.append((request.url, request.headers.get("authorization"), kinds))
        route.continue_()

    page.route("**/api/events*", handle)   # with or without a query string
    page.goto(host_page(page, base, role_token="host.token", k=3, rerank="off"))
    type_query(page, "immunization")
    wait_final(page)
    box = page.locator(COMBOBOX)
    for _ in range(completion_count(page) + 1):   # past the suggested queries to the first task
        box.press("ArrowDown")
    with page.expect_navigation():
        box.press("Enter")
    wait_until(page, lambda: any("click" in kinds for _url, _auth, kinds in sent))
    assert sent and all(auth == "Bearer host.token" or parse_qs(urlparse(url).query).get("role_token") == ["host.token"]
                        for url, auth, _kinds in sent)


# -- accessibility ----------------------------------------------------------------------------------
def test_the_combobox_follows_the_aria_pattern(demo, live_server, page):
    base = live_server(demo)
    page.goto(base + "/")
    box = page.locator(COMBOBOX)
    listbox_id = box.get_attribute("aria-controls")
    listbox = page.locator(f"#{listbox_id}")
    assert listbox.get_attribute("role") == "listbox"
    assert box.get_attribute("aria-expanded") == "false" and box.get_attribute("aria-autocomplete") == "list"
    assert page.get_by_label("Search tasks", exact=True).get_attribute("role") == "combobox"   # a real, visible label

    type_query(page, "imunization")
    wait_final(page)
    assert box.get_attribute("aria-expanded") == "true"
    options = listbox.locator("[role=option]")
    assert options.count() > 1
    assert all(options.nth(i).get_attribute("aria-selected") == "false" for i in range(options.count()))
    assert box.get_attribute("aria-activedescendant") is None

    box.press("ArrowDown")
    assert box.get_attribute("aria-activedescendant") == options.nth(0).get_attribute("id")
    box.press("ArrowUp")   # wraps to the last option
    last = options.count() - 1
    assert box.get_attribute("aria-activedescendant") == options.nth(last).get_attribute("id")
    assert options.nth(last).get_attribute("aria-selected") == "true"
    assert options.nth(0).get_attribute("aria-selected") == "false"
    assert page.evaluate("document.activeElement.getAttribute('role')") == "combobox"   # focus stays in the input

    box.press("Home")   # editing keys are the browser's own: the caret moves, the popup stays
    assert box.evaluate("e => e.selectionStart") == 0 and box.get_attribute("aria-expanded") == "true"
    box.press("End")
    assert box.evaluate("e => e.selectionStart") == len("imunization")

    box.press("Escape")
    assert box.get_attribute("aria-expanded") == "false" and box.get_attribute("aria-activedescendant") is None
    assert box.input_value() == "imunization"
    box.press("Alt+ArrowDown")
    assert box.get_attribute("aria-expanded") == "true" and box.get_attribute("aria-activedescendant") is None
    box.press("Escape")
    box.press("Escape")   # the second Escape clears
    assert box.input_value() == "" and box.get_attribute("aria-expanded") == "false"


@pytest.mark.skipif(not AXE_JS.exists(), reason=f"axe-core not installed at {AXE_JS} (make test installs it from npm)")
def test_axe_finds_no_violations_with_results_open(demo, live_server, page):
    base = live_server(demo)
    page.goto(base + "/")
    type_query(page, "imunization")
    wait_final(page)
    page.locator(COMBOBOX).press("ArrowDown")
    page.evaluate(AXE_JS.read_text(encoding="utf-8"))   # evaluated over DevTools: the page's CSP is untouched
    result = page.evaluate("""async () => {
        const r = await axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}});
        return {violations: r.violations.map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.target.join(' '))})),
                passes: r.passes.map(p => p.id)};
    }""")
    assert result["violations"] == []
    # the checks that matter for a combobox did run (and passed) on this page
    assert {"aria-required-attr", "aria-valid-attr-value", "aria-required-children", "label",
            "color-contrast"} <= set(result["passes"])
