"""Issue 44 item 6 in Chromium: an editor runs the evaluation of the crafted catalog of
tests/test_evaluation_page_truth.py from the page and reads it as its admin would:

- the off-topic sentence reads for its one query (no "0%" of one query);
- every query the page quotes is quoted once (a <q>, no marks of its own inside it);
- "Add a case in other words" opens the case editor with the task and the suggested rationale;
- no reason has a query fragment glued onto it ("... (ouch)");
- no fix carries a word only the held-out test has ("ouch report" gets none), and the effect the
  page states for the fix it offers is what the next run measures, once that fix is published
  through the editor (preview, publish) exactly as the link pre-fills it.
"""
from __future__ import annotations

import re
from urllib.parse import unquote_plus

from tests.test_evaluation_page_truth import PASSWORD, make_app

QUOTES = "\"“”'‘’"


def run_from_the_page(page, base: str) -> None:
    page.goto(f"{base}/admin/evaluation")
    page.click("text=Run the evaluation now")
    page.wait_for_selector("section.ev-lead", timeout=120_000)   # the poller reloads the page when the run ends


def row(page, query: str):
    return page.locator("table.ev-misses tbody tr").filter(has=page.locator("td:first-child q", has_text=query))


def test_the_evaluation_page_tells_the_truth(tmp_path, shared_cache_dir, live_server, page):
    app = make_app(tmp_path, shared_cache_dir, SESSION_COOKIE_SECURE="0")
    base = live_server(app)
    problems = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.goto(f"{base}/admin/login")
    page.fill("input[name=username]", "eddie")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    run_from_the_page(page, base)

    # the off-topic sentence
    off_topic = page.locator("section.ev-lead p", has_text="off-topic").inner_text()
    assert off_topic == "The one off-topic test query (no right task) was refused (“no confident match”, no task shown)."

    # quoted once: every <q> holds the words alone; the suggested sentences are not inside one
    quoted = page.locator("q").evaluate_all("qs => qs.map(q => q.textContent.trim())")
    assert quoted and all(q[:1] not in QUOTES and q[-1:] not in QUOTES for q in quoted), quoted
    assert page.locator("q .ev-sentence, q.ev-sentence").count() == 0
    assert page.locator(".ev-sentence").count() == 2

    # nothing glued onto a reason
    ouch = row(page, "ouch report")
    why = ouch.locator("td").nth(3).inner_text()
    assert "(ouch)" not in why and why.startswith("it uses words the catalog does not know\nA word this run never saw:")

    # no fix leaks the held-out test: none offered for "ouch report", no link carries "ouch"
    hrefs = page.locator("table.ev-misses a.button").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert len(hrefs) == 2 and not any("ouch" in unquote_plus(h).lower() for h in hrefs), hrefs
    assert ouch.locator("a").count() == 0 and "No fix offered" in ouch.inner_text()

    # "Add a case in other words": the editor opens with the task and the suggested rationale
    van = row(page, "van check before leaving")
    suggested = van.locator(".ev-sentence").inner_text()
    assert suggested.startswith("“van”, “check”, “leaving” should find Vehicle Inspections")
    assert "van check before leaving" not in suggested
    van.locator("text=Add a case in other words").click()
    assert page.locator("h1").inner_text() == "New test case"
    assert page.input_value("textarea[name=rationale]") == suggested
    assert page.is_checked("input[name=gold][value='t.inspect']")
    page.go_back()

    # the fix through a training case: the effect the page states ...
    home = row(page, "home early for behavior")
    effect = home.locator(".ev-effect").inner_text()
    measured = re.search(r"Hit@5 (\d\.\d{3}) → (\d\.\d{3}) \(([+-]\d\.\d{3})\); (\d+) newly pass", effect)
    assert measured and measured.groups() == ("0.000", "0.333", "+0.333", "1"), effect
    sentence = home.locator(".ev-sentence").inner_text()
    home.locator("text=Teach its words through").click()
    assert sentence in page.input_value("textarea[name=rationale]")
    page.click("form.edit button[type=submit]")               # Preview
    page.click("button[name=publish]")                        # Publish, as the link pre-filled it
    page.wait_for_load_state()
    # ... is what the next run measures
    run_from_the_page(page, base)
    assert f"Hit@5 = {measured.group(2)}" in page.inner_text("section.ev-lead")
    assert row(page, "home early for behavior").count() == 0
    assert row(page, "ouch report").count() == 1
    assert problems == []
