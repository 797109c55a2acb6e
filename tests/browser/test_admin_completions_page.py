"""The admin's completions page (issue 42) in Debian's headless Chromium against a real HTTP
server: sign in, see what is offered under the search box, block one suggestion by its Block
button and a word by the form, see /api/search stop offering both, then undo both. Saves
docs/admin-completions.png."""
import json

from tests.browser.conftest import screenshot, sign_in
from tests.browser.test_admin_editor import editor_app  # noqa: F401  (the fixture: demo app, editor eddie)

SUGGESTION = "Eligibility Determination"


def completions(page, base: str, typed: str) -> list[str]:
    response = page.request.get(f"{base}/api/search", params={"q": typed, "k": "3", "rerank": "0"})
    return [c["text"] for c in json.loads(response.text()).get("completions", [])]


def test_an_editor_blocks_a_suggestion_and_a_word_and_unblocks_them(editor_app, live_server, page):  # noqa: F811
    page.set_default_timeout(60_000)
    base = live_server(editor_app)
    assert SUGGESTION in completions(page, base, "elig")
    sign_in(page, base)

    page.goto(f"{base}/admin/completions")
    row = page.locator("table.completions-offered tr", has=page.locator(f"input[name=text][value='{SUGGESTION}']"))
    row.locator("button:has-text('Block')").first.click()
    page.wait_for_load_state()
    assert SUGGESTION not in completions(page, base, "elig")
    page.fill("#blocked-word", "attendance")
    page.click("button:has-text('Block word')")
    page.wait_for_load_state()
    assert not any("attendance" in text.lower() for text in completions(page, base, "atten"))
    page.goto(f"{base}/admin/completions#blocked")
    screenshot(page, "admin-completions.png")

    page.locator("table.completions-blocked button:has-text('Unblock')").first.click()
    page.wait_for_load_state()
    page.locator("ul.completions-words button:has-text('Remove')").first.click()
    page.wait_for_load_state()
    assert SUGGESTION in completions(page, base, "elig")
    assert any("attendance" in text.lower() for text in completions(page, base, "atten"))
