"""The admin's completions page (admin.completions; issue 42) on SQLite and PostgreSQL: behind login
and CSRF, editors only for changes; it lists what is offered and what is about to be (people
settling, one person short), blocks a suggestion or a word (audited; the live completions of
/api/search drop it at once) and unblocks them."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from admin.audit import entries
from analytics.records import EventRecord, SearchRecord
from analytics.store import AnalyticsStore
from tests.conftest import signed_in

PAGE = "/admin/completions"


def offered(app, prefix: str) -> list[str]:
    response = app.test_client().get("/api/search", query_string={"q": prefix})
    assert response.status_code == 200
    return [c["text"] for c in response.get_json()["completions"]]


def crowd(app, query: str, people: int, task_id: str, age: timedelta, tag: str) -> None:
    """`people` verified people (pseudonyms) searched `query` and clicked `task_id`, `age` ago."""
    at = datetime.now(timezone.utc) - age
    searches, events = [], []
    for i in range(people):
        search = SearchRecord(id=f"{tag}-{i}", at=at, session_id=f"{tag}-session-{i}", query=query, rerank=False,
                              result_ids=(task_id,), no_confident_match=False, person=f"{tag[:4]}{i:02x}")
        searches.append(search)
        events.append(EventRecord(at=at, search_id=search.id, type="click", session_id=search.session_id,
                                  task_id=task_id, position=1))
    AnalyticsStore(app.extensions["taskfinder"].store.engine).write(searches, events)


def test_the_page_needs_a_login_and_its_changes_an_editor_and_the_csrf_token(admin_app):
    anonymous = admin_app.test_client()
    assert anonymous.get(PAGE).status_code == 302
    assert anonymous.get(PAGE).headers["Location"].startswith("/admin/login")
    assert anonymous.post(f"{PAGE}/block", data={"text": "asq"}).status_code == 302
    viewer, csrf = signed_in(admin_app, "vera")
    page = viewer.get(PAGE)
    assert page.status_code == 200 and "About to be offered" in page.get_data(as_text=True)
    assert ">Block<" not in page.get_data(as_text=True)                 # viewers see no buttons
    for url, form in ((f"{PAGE}/block", {"text": "ASQ-3 Screening"}), (f"{PAGE}/unblock", {"key": "x"}),
                      (f"{PAGE}/words", {"word": "asq"}), (f"{PAGE}/words/remove", {"word": "asq"})):
        assert viewer.post(url, data={**form, "csrf_token": csrf}).status_code == 403, url
    editor, csrf = signed_in(admin_app, "eddie")
    assert editor.post(f"{PAGE}/block", data={"text": "ASQ-3 Screening"}).status_code == 400     # no CSRF token
    assert editor.post(f"{PAGE}/words", data={"word": "asq"}).status_code == 400
    assert "ASQ-3 Screening" in offered(admin_app, "asq")
    nav = editor.get("/admin/").get_data(as_text=True)
    assert f'href="{PAGE}"' in nav


def test_an_editor_blocks_and_unblocks_a_suggestion_and_a_word_audited_and_live_at_once(admin_app):
    editor, csrf = signed_in(admin_app, "eddie")
    engine = admin_app.extensions["taskfinder"].store.engine
    assert "ASQ-3 Screening" in offered(admin_app, "asq")
    response = editor.post(f"{PAGE}/block", data={"text": "ASQ-3 Screening", "csrf_token": csrf})
    assert response.status_code == 302
    assert "ASQ-3 Screening" not in offered(admin_app, "asq")
    page = editor.get(PAGE).get_data(as_text=True)
    assert "Blocked suggestions (1)" in page and 'name="key" value="asq-3 screening"' in page
    assert [(e.action, e.actor) for e in entries(engine, target="completion:asq-3 screening")] == [
        ("completion.block", "user:eddie")]
    assert editor.post(f"{PAGE}/unblock", data={"key": "asq-3 screening", "csrf_token": csrf}).status_code == 302
    assert "ASQ-3 Screening" in offered(admin_app, "asq")
    assert editor.post(f"{PAGE}/unblock", data={"key": "asq-3 screening", "csrf_token": csrf}).status_code == 404

    before = offered(admin_app, "scree")
    assert any("screening" in text.lower() for text in before)
    assert editor.post(f"{PAGE}/words", data={"word": "Screening", "csrf_token": csrf}).status_code == 302
    assert all("screening" not in text.lower() for text in offered(admin_app, "scree")), offered(admin_app, "scree")
    assert "<q>screening</q>" in editor.get(PAGE).get_data(as_text=True)
    assert editor.post(f"{PAGE}/words", data={"word": "two words", "csrf_token": csrf}).status_code == 400
    assert editor.post(f"{PAGE}/words/remove", data={"word": "screening", "csrf_token": csrf}).status_code == 302
    assert offered(admin_app, "scree") == before
    assert [e.action for e in entries(engine, target="completion-word:screening")] == [
        "completion.word_unblock", "completion.word_block"]


def test_the_page_shows_what_is_offered_and_what_is_about_to_be_and_blocks_it_before(admin_app, demo_tasks):
    task = next(t for t in demo_tasks if not t.roles)
    crowd(admin_app, "center closure notice", 6, task.id, timedelta(days=2), "settled")   # offered
    crowd(admin_app, "center opening notice", 5, task.id, timedelta(minutes=5), "waiting")  # settles tomorrow
    crowd(admin_app, "center lunch notice", 4, task.id, timedelta(days=2), "short")       # one person short
    crowd(admin_app, "center bus notice", 3, task.id, timedelta(days=2), "twoshort")      # two short: not shown
    editor, csrf = signed_in(admin_app, "eddie")
    page = editor.get(PAGE).get_data(as_text=True)
    offered_part, upcoming_part = page.split('id="offered"')[1], page.split('id="upcoming"')[1].split('id="offered"')[0]
    assert "center closure notice" in offered_part.split('id="blocked"')[0]
    assert "<td>popular search</td>\n    <td>6</td>" in offered_part
    assert "center opening notice" in upcoming_part and "center lunch notice" in upcoming_part
    assert "one person short" in upcoming_part and "center bus notice" not in page
    assert "center closure notice" in offered(admin_app, "center clo")
    assert editor.post(f"{PAGE}/block", data={"text": "center opening notice", "csrf_token": csrf}).status_code == 302
    assert editor.post(f"{PAGE}/block", data={"text": "center closure notice", "csrf_token": csrf}).status_code == 302
    assert offered(admin_app, "center clo") == []
    page = editor.get(PAGE).get_data(as_text=True)
    assert "center opening notice" not in page.split('id="upcoming"')[1].split('id="offered"')[0]   # blocked
    assert "Blocked suggestions (2)" in page
