"""Issue 44 item 4, in a real browser: the change preview ranks with the fit that serves right
after publishing, but an automatic refit on the changed test cases follows and replaces it. The
preview says so (with how long the last fit took), and the test case's page shows what the
search serves, with which fit, saying while the refit is under way; once it is done the page
shows the new fit's ranking, the one the API serves."""
from __future__ import annotations

import re
import time

import pytest

from tests.browser.conftest import sign_in
from tests.conftest import ADMIN_PASSWORD, FAST_HASHER, build_app, close_app, make_settings

QUERY = "Lead Screening"   # a demo case's query: the editor rewords it (a rationale alone refits nothing)
NEW_QUERY = "blood lead test results"


@pytest.fixture
def refitting_app(tmp_path, shared_cache_dir, demo_tasks, demo_cases):
    # without embeddings a fit of the demo takes seconds rather than a minute: the refit is
    # waited for twice (the first fit, then the one publishing starts)
    app = build_app(make_settings(tmp_path, shared_cache_dir, SECRET_KEY="r" * 40, SESSION_COOKIE_SECURE=0,
                                  AUTO_FIT="1", EMBEDDINGS_ENABLED="0"), demo_tasks, demo_cases)
    accounts = app.extensions["taskfinder"].accounts
    accounts.hasher = FAST_HASHER
    accounts.create_user("rita", ADMIN_PASSWORD, "editor", actor="cli:test")
    service = app.extensions["taskfinder"].search
    service.live(wait=True)
    service.refit_now()                 # the first fit, so that the edit below is what a refit follows
    service.live(wait=True)
    yield app
    close_app(app)


def served_fit(app) -> int | None:
    return app.extensions["taskfinder"].search.live(wait=True).params.fit_id


def test_the_preview_says_a_refit_follows_and_the_case_page_shows_what_it_serves(refitting_app, live_server, page,
                                                                                  demo_cases):
    page.set_default_timeout(120_000)
    base = live_server(refitting_app)
    store = refitting_app.extensions["taskfinder"].store
    case = next(c for c in store.cases() if c.query == QUERY)
    first_fit = served_fit(refitting_app)
    assert first_fit is not None

    sign_in(page, base, "rita")

    page.goto(f"{base}/admin/cases/{case.id}/edit")
    page.fill("input[name=query]", NEW_QUERY)
    page.click("button:has-text('Preview')")
    page.wait_for_selector("section.preview:has-text('Cross-validated suite')")
    meta = page.inner_text("section.preview .pv-meta")
    assert f"fit {first_fit}" in meta, meta
    assert "until the automatic refit on the changed test cases is done" in meta, meta
    assert re.search(r"the last fit took about \d+ s", meta), meta

    page.click("button[name=publish]")
    page.wait_for_selector("text=Published.")
    page.goto(f"{base}/admin/cases/{case.id}")
    said = page.inner_text("main")
    assert "How the search ranks it now" in said
    assert "A refit on the current test cases is under way" in said or served_fit(refitting_app) != first_fit, said

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        page.goto(f"{base}/admin/cases/{case.id}")
        said = page.inner_text("main")
        if "under way" not in said:
            break
        time.sleep(1)
    new_fit = served_fit(refitting_app)
    assert new_fit != first_fit and "under way" not in said, said
    assert f"fit {new_fit})" in said, said
    served = refitting_app.extensions["taskfinder"].search.search(NEW_QUERY, k=5, restrict_roles=False)["results"]
    shown = page.locator("ol.served li").all_inner_texts()
    assert len(shown) == len(served) and all(line.startswith(r["name"] + " ") for line, r in zip(shown, served)), \
        (shown, served)
    assert all(f"{r['score']:.2f}" in line for line, r in zip(shown, served)), (shown, served)
