"""Query completions in the widget, in a real browser (Debian's Chromium via Playwright) against the
real app over HTTP: typed letter by letter, the suggested whole queries appear above the tasks, the
arrow keys reach them, Enter or a click searches one, axe finds nothing wrong with them open, and a
completion named like markup stays text. The demo catalog without embeddings (fast to index)."""
from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from catalog.records import TaskRecord
from tests.browser.test_widget import AXE_JS, COMBOBOX, XSS_NAME, record_csp_violations, type_query, wait_final
from tests.conftest import build_app, close_app, make_settings


@pytest.fixture(scope="module")
def sparse_demo(tmp_path_factory, shared_cache_dir, demo_tasks, demo_cases):
    markup = TaskRecord(id="zz.xss", name=XSS_NAME, help="A task named like markup.", category="zz")
    app = build_app(make_settings(tmp_path_factory.mktemp("completions-browser"), shared_cache_dir,
                                  EMBEDDINGS_ENABLED="0"), [*demo_tasks, markup], demo_cases)
    app.extensions["taskfinder"].search.live(wait=True)
    yield app
    close_app(app)


def completions(page):
    return page.locator("[role=option][data-completion]")


def searched_for(text: str):
    return lambda r: "/api/search" in r.url and parse_qs(urlparse(r.url).query).get("q") == [text]


def test_typing_asq_shows_completions_the_keyboard_reaches_and_enter_searches(sparse_demo, live_server, page):
    base = live_server(sparse_demo)
    record_csp_violations(page)
    page.goto(base + "/")
    with page.expect_response(searched_for("asq")) as answered:
        type_query(page, "asq", delay_ms=60)   # one keystroke at a time: "a", "as", "asq"
    wait_final(page)
    offered = answered.value.json()["completions"]
    assert offered and offered[0] == {"text": "ASQ-3 Screening", "source": "case", "language": "en"}
    assert completions(page).all_text_contents() == [c["text"] + ", suggested search" for c in offered]
    assert [completions(page).nth(i).get_attribute("data-source") for i in range(len(offered))] == \
        [c["source"] for c in offered]
    # above the tasks, in the one listbox the combobox controls
    listbox = page.locator("[role=listbox]")
    assert listbox.locator("[role=option]").first.get_attribute("data-completion") == "ASQ-3 Screening"
    assert listbox.locator("[role=option][data-task-id]").count() >= 1

    box = page.locator(COMBOBOX)
    box.press("ArrowDown")
    first = completions(page).first
    assert box.get_attribute("aria-activedescendant") == first.get_attribute("id")
    assert first.get_attribute("aria-selected") == "true"
    box.press("ArrowDown")
    box.press("ArrowUp")
    assert box.get_attribute("aria-activedescendant") == first.get_attribute("id")
    with page.expect_response(searched_for("ASQ-3 Screening")) as chosen:
        box.press("Enter")
    wait_final(page)
    assert box.input_value() == "ASQ-3 Screening"
    assert chosen.value.json()["results"][0]["id"] == "health.asq3-screening"
    assert page.locator("[role=option][data-task-id]").first.get_attribute("data-task-id") == "health.asq3-screening"
    assert page.evaluate("window.__csp") == []


def test_clicking_a_completion_searches_it(sparse_demo, live_server, page):
    base = live_server(sparse_demo)
    page.goto(base + "/")
    type_query(page, "imm", delay_ms=60)
    wait_final(page)
    target = completions(page).filter(has_text="Immunization Records")
    assert target.count() == 1
    with page.expect_response(searched_for("Immunization Records")):
        target.click()
    wait_final(page)
    assert page.locator(COMBOBOX).input_value() == "Immunization Records"
    assert page.evaluate("document.activeElement.getAttribute('role')") == "combobox"   # focus stays in the box
    assert all(c["text"].lower() != "immunization records" for c in
               page.evaluate("() => [...document.querySelectorAll('[data-completion]')]"
                             ".map(e => ({text: e.getAttribute('data-completion')}))"))


def test_a_completion_named_like_markup_stays_text(sparse_demo, live_server, page):
    base = live_server(sparse_demo)
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(base + "/")
    type_query(page, "img")
    wait_final(page)
    markup = page.locator(f"[role=option][data-completion='{XSS_NAME}']")
    assert markup.locator(".tf-completion-text").text_content() == XSS_NAME
    assert page.locator(".tf-widget img, .tf-widget script").count() == 0
    assert dialogs == []


@pytest.mark.skipif(not AXE_JS.exists(), reason=f"axe-core not installed at {AXE_JS} (make test installs it from npm)")
def test_axe_finds_no_violations_with_completions_open(sparse_demo, live_server, page):
    base = live_server(sparse_demo)
    page.goto(base + "/")
    type_query(page, "asq")
    wait_final(page)
    assert completions(page).count() >= 1
    page.locator(COMBOBOX).press("ArrowDown")   # a completion active
    page.evaluate(AXE_JS.read_text(encoding="utf-8"))
    result = page.evaluate("""async () => {
        const r = await axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}});
        return {violations: r.violations.map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.target.join(' '))})),
                passes: r.passes.map(p => p.id)};
    }""")
    assert result["violations"] == []
    assert {"aria-required-children", "aria-valid-attr-value", "color-contrast"} <= set(result["passes"])
