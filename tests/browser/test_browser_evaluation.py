"""The evaluation page in Chromium: a viewer starts a run from the page, its script follows the
progress, and the report with its SVG chart appears, without any Content-Security-Policy
violation (no inline script or style)."""
from __future__ import annotations

from tests.browser.conftest import screenshot
from tests.test_admin_evaluation import make_eval_app, CASES


def test_a_viewer_runs_the_evaluation_from_the_page(tmp_path, shared_cache_dir, live_server, page):
    app = make_eval_app(tmp_path, shared_cache_dir, CASES, database_url=None, SESSION_COOKIE_SECURE="0")
    base = live_server(app)
    problems, failed = [], []
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("response", lambda response: failed.append(response.url) if response.status >= 400 else None)

    page.goto(f"{base}/admin/login")
    page.fill("input[name=username]", "vera")
    page.fill("input[name=password]", "a long enough password")
    page.click("button[type=submit]")
    page.click("nav >> text=Evaluation")
    assert page.locator("h1").inner_text() == "Offline evaluation"
    page.click("text=Run the evaluation now")
    page.wait_for_selector("section.ev-lead", timeout=240_000)  # the poller reloads the page when the run ends
    assert "test queries the right task comes first" in page.inner_text("section.ev-lead")
    assert not page.is_visible("svg.ev-chart")                   # the ablations start collapsed
    page.click("details.ev-ablations > summary")
    page.wait_for_selector("svg.ev-chart")
    assert page.locator("table.ev-table tbody tr").count() >= 8
    assert "done" in page.locator("table.ev-runs tbody tr").first.inner_text()
    # every request of the page answered (the browser's own favicon request aside: a 404 in the
    # console), and no CSP refusal ("Refused to ...") nor script error
    assert [url for url in failed if not url.endswith("/favicon.ico")] == []
    assert [p for p in problems if "status of 404" not in p] == []
    page.set_viewport_size({"width": 1100, "height": 820})   # the README's screenshot: small
    screenshot(page, "admin-evaluation.png")
