""""Revert this change" in Debian's headless Chromium against a real HTTP server (issue 32 item
7): an editor edits a test case, then a task; from the case edit's version page reverts that one
change alone: the confirmation page lists exactly the one record and what it goes back to, the
publish is a new version "Revert version N", the search answers as before the case edit, and the
later task edit stays."""

from tests.browser.test_admin_editor import editor_app, first_result, wait_for_first  # noqa: F401 (fixture)
from tests.browser.conftest import sign_in

QUERY = "bus stops"
TASK = "gov.program-goals"


def test_an_editor_reverts_one_change_from_its_version_page(editor_app, live_server, page):
    page.set_default_timeout(120_000)   # a preview ranks the whole suite: seconds, more on a busy machine
    base = live_server(editor_app)
    store = editor_app.extensions["taskfinder"].store
    case = next(c for c in store.cases() if c.query == QUERY)
    original_gold = case.gold[0]
    assert first_result(page, base, QUERY) == original_gold

    sign_in(page, base)

    # the change to revert: the case's gold moves to another task (edited through the form)
    page.goto(f"{base}/admin/cases/{case.id}/edit")
    page.uncheck(f"input[type=checkbox][name=gold][value='{original_gold}']")
    page.fill("input[name=gold_add]", "health.lead-screening")
    page.fill("textarea[name=rationale]", "a mistaken edit, to be reverted")
    page.click("button:text-is('Preview')")
    page.click("button[name=publish]")
    page.wait_for_selector("text=Published.")
    edit = store.versions(limit=1)[0].id
    assert wait_for_first(page, base, "health.lead-screening", QUERY) == "health.lead-screening"

    # a later, unrelated change that the revert must keep
    page.goto(f"{base}/admin/tasks/{TASK}/edit")
    page.fill("input[name=name]", "Program goals (kept)")
    page.click("button:text-is('Preview')")
    page.click("button[name=publish]")
    page.wait_for_selector("text=Published.")

    page.goto(f"{base}/admin/versions/{edit}")
    page.click("text=Revert this change")
    page.wait_for_selector(f"h1:has-text('Revert version {edit} alone?')")
    records = page.locator("section.change.revert")
    assert records.count() == 1
    assert records.first.get_attribute("data-record") == f"case:{case.id}"
    rows = records.first.locator("tr.changed")
    shown = {rows.nth(i).get_attribute("data-field"): [c.strip() for c in rows.nth(i).locator("td").all_inner_texts()]
             for i in range(rows.count())}
    assert shown == {"gold": ["health.lead-screening", original_gold],
                     "rationale": ["a mistaken edit, to be reverted", case.rationale]}
    assert first_result(page, base, QUERY) == "health.lead-screening", "reviewing changed nothing"

    page.click("button[name=confirm]")
    page.wait_for_selector(f"text=Reverted version {edit} alone")
    revert = store.versions(limit=1)[0]
    assert (revert.kind, revert.message, revert.actor) == ("revert", f"Revert version {edit}", "user:eddie")
    assert page.url == f"{base}/admin/versions/{revert.id}"
    assert wait_for_first(page, base, original_gold, QUERY) == original_gold
    assert store.task(TASK).name == "Program goals (kept)"
