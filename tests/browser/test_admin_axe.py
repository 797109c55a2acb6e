"""axe-core over the admin pages an editor works in (issue 44 item 10): the task and case lists
(two unnamed <nav> landmarks, the bar's and the pager's, were `landmark-unique`) and an edit's
preview (the cross-validated suite's corner header cell was an `empty-table-header`). All of
axe's rules run, best practices included: those two are best-practice rules."""
from __future__ import annotations

import pytest

from tests.browser.test_admin_editor import editor_app  # noqa: F401  (the fixture)
from tests.browser.test_widget import AXE_JS
from tests.browser.conftest import sign_in

pytestmark = pytest.mark.skipif(not AXE_JS.exists(),
                                reason=f"axe-core not installed at {AXE_JS} (make test installs it from npm)")


def violations(page) -> list[dict]:
    page.evaluate(AXE_JS.read_text(encoding="utf-8"))   # evaluated over DevTools: the page's CSP is untouched
    return page.evaluate("""async () => {
        const r = await axe.run(document);
        return r.violations.map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.target.join(' '))}));
    }""")


def test_axe_finds_nothing_on_the_lists_and_an_edits_preview(editor_app, live_server, page):  # noqa: F811
    page.set_default_timeout(120_000)   # a preview ranks the whole suite: seconds, more on a busy machine
    base = live_server(editor_app)
    sign_in(page, base)
    for path in ("/admin/tasks", "/admin/cases"):
        page.goto(base + path)
        assert page.locator("nav.pager").count() == 1, f"{path}: the demo fills more than one page"
        assert violations(page) == [], path

    case = editor_app.extensions["taskfinder"].store.cases()[0]
    page.goto(f"{base}/admin/cases/{case.id}/edit")
    page.fill("textarea[name=rationale]", case.rationale + " (reworded)")
    page.click("button:has-text('Preview')")
    page.wait_for_selector("section.preview:has-text('Cross-validated suite')")
    assert violations(page) == []
