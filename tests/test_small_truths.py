"""Issue 32, items 10 (favicon), 11, 12 and 13: small things the product said or did that were
not true or not kind, each checked through the real app on SQLite and PostgreSQL.

* every admin page names an icon the browser can fetch (no /favicon.ico 404);
* the analytics page names tasks by name (the id only as the link's target) and says what its
  counts are in an admin's words, and each of its figures is true on a fresh database;
* an import folds tabs and line breaks in one-line fields (a case's query, a task's name) to
  one space instead of refusing the whole file, and still refuses other control characters;
* `app.py search` on a database that was never set up says what to run, not a traceback.
"""
from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from contextlib import nullcontext
from datetime import timedelta

import pytest

from analytics.records import EventRecord, SearchRecord
from catalog import db
from catalog.formats import ImportRejected, load_cases_bytes, load_tasks_bytes
from catalog.models import utcnow
from settings import PROJECT_ROOT
from tests.conftest import FAST_HASHER, build_app, close_app, make_settings, postgres_schema, signed_in


# -- item 10: the favicon --------------------------------------------------------------------------------
ICON_LINK = re.compile(r'<link rel="icon" type="image/svg\+xml" href="([^"]+)">')


def admin_pages(client) -> list[str]:
    """The admin's pages a signed-in person reaches: every link of the dashboard's navigation bar,
    a task's, a test case's and a version's page, and a page that is not there (its error page)."""
    dashboard = client.get("/admin/").get_data(as_text=True)
    nav = re.search(r"<nav>(.*?)</nav>", dashboard, re.S).group(1)
    return ["/admin/", *re.findall(r'href="([^"]+)"', nav), "/admin/tasks/ersea.waitlist", "/admin/cases/1",
            "/admin/versions/1", "/admin/tasks/no.such-task"]


def test_every_admin_page_names_an_icon_the_browser_can_fetch(admin_app):
    viewer, _csrf = signed_in(admin_app, "vera")
    pages = admin_pages(viewer)
    assert len(pages) >= 9 and "/admin/analytics/" in pages
    icons = set()
    for path in pages:
        html = viewer.get(path).get_data(as_text=True)
        found = ICON_LINK.findall(html)
        assert len(found) == 1, (path, html[:400])
        icons |= set(found)
    login = admin_app.test_client().get("/admin/login").get_data(as_text=True)
    icons |= set(ICON_LINK.findall(login))
    assert icons == {"/admin/static/favicon.svg"}
    anonymous = admin_app.test_client().get("/admin/static/favicon.svg")   # before signing in too
    assert anonymous.status_code == 200 and anonymous.mimetype == "image/svg+xml"
    assert anonymous.get_data(as_text=True).startswith("<svg ")


# -- item 11: the analytics page, in an admin's words, each figure true -----------------------------------
@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def fresh_app(request, tmp_path_factory, shared_cache_dir, demo_tasks, demo_cases):
    """The demo catalog on a fresh database (no search logged yet), with a viewer `vera`."""
    with postgres_schema() if request.param == "postgresql" else nullcontext((None, None)) as (_schema, url):
        env = {"SECRET_KEY": "k" * 40, "ANALYTICS_FLUSH_INTERVAL_S": "3600", **({"DATABASE_URL": url} if url else {})}
        app = build_app(make_settings(tmp_path_factory.mktemp("truths"), shared_cache_dir, **env), demo_tasks,
                        demo_cases)
        accounts = app.extensions["taskfinder"].accounts
        accounts.hasher = FAST_HASHER
        accounts.create_user("vera", "a long enough password", "viewer", actor="cli:test")
        yield app
        close_app(app)


RETIRED = "ersea.waitlist"           # "Waitlist", retired before the page is read
GONE = "gone.task"                   # a clicked id the catalog does not hold


def seed_known_log(app) -> None:
    """Six requests with known answers: one session-less API call (a request, not a search) and
    five searches, each in its own session except the rephrased pair:
      "xyzzy family resources" found nothing and was rephrased into "family resources", clicked at 1;
      "waitlist" clicked at 2 on a task retired since; "old thing" clicked at 1 on a task no
      longer in the catalog; "nothing here" showed results and nobody clicked (abandoned).
    Plus two reports (a click, results shown) about a search that is not in the log."""
    now = utcnow() - timedelta(minutes=30)
    searches = [
        SearchRecord("api-call-0000000001", now, None, "api call", True, ("nutrition.menus",)),
        SearchRecord("rephrased-00000001", now, "session-a", "xyzzy family resources", True, (), True),
        SearchRecord("rephrasing-0000001", now + timedelta(seconds=40), "session-a", "family resources", True,
                     ("family.resource-directory",)),
        SearchRecord("retired-click-0001", now, "session-b", "waitlist", True, ("nutrition.menus", RETIRED)),
        SearchRecord("gone-click-0000001", now, "session-c", "old thing", True, (GONE,)),
        SearchRecord("abandoned-0000001", now, "session-d", "nothing here", True, ("nutrition.menus",)),
    ]

    def click(search_id, session, task, position):
        return EventRecord(now + timedelta(seconds=45), search_id, "click", session_id=session, task_id=task,
                           position=position)
    events = [click("rephrasing-0000001", "session-a", "family.resource-directory", 1),
              click("retired-click-0001", "session-b", RETIRED, 2),
              click("gone-click-0000001", "session-c", GONE, 1),
              click("not-in-the-log-0001", "session-e", "nutrition.menus", 1),
              EventRecord(now, "not-in-the-log-0001", "impression", session_id="session-e", query="menus",
                          task_ids=("nutrition.menus",))]
    app.extensions["taskfinder_analytics"].store.write(searches, events)


def totals(html: str) -> dict[str, str]:
    block = re.search(r'<dl class="summary" id="totals">(.*?)</dl>', html, re.S).group(1)
    return dict(re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", block))


def table_rows(html: str, table_id: str) -> list[str]:
    body = re.search(rf'<table class="queries" id="{table_id}">.*?<tbody>(.*?)</tbody>', html, re.S).group(1)
    return [row.strip() for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)]


def test_the_analytics_page_names_tasks_and_each_figure_is_true(fresh_app):
    recorder = fresh_app.extensions["taskfinder_analytics"]
    viewer, _csrf = signed_in(fresh_app, "vera")

    # a fresh database: nothing happened, and the page says exactly that
    recorder.rollup(force=True)
    empty = viewer.get("/admin/analytics/?days=7").get_data(as_text=True)
    assert totals(empty) == {"Searches": "0", "No-result rate": "–", "Click-through rate": "–",
                             "Average click position": "–", "Abandonment rate": "–", "Reformulation rate": "–",
                             "Clicks and other activity with no recorded search": "0"}
    assert "0 searches from 0 requests" in empty and "came without a session" not in empty
    assert table_rows(empty, "top-results") == ['<td colspan="2">None in this period.</td>']

    store = fresh_app.extensions["taskfinder"].store
    seed_known_log(fresh_app)
    store.set_task_active(RETIRED, store.task(RETIRED).version, False)
    recorder.rollup(force=True)
    html = viewer.get("/admin/analytics/?days=7").get_data(as_text=True)

    assert totals(html) == {
        "Searches": "5",                  # the session-less API call is a request, not a search
        "No-result rate": "20%",          # "xyzzy family resources"
        "Click-through rate": "60%",      # "family resources", "waitlist", "old thing"
        "Average click position": "1.3",  # (1 + 2 + 1) / 3
        "Abandonment rate": "20%",        # "nothing here"
        "Reformulation rate": "20%",      # "xyzzy family resources" -> "family resources"
        "Clicks and other activity with no recorded search": "2",   # a click and results shown
    }
    assert "5 searches from 6 requests" in html and "1 of the requests came without a session" in html

    # top results by name, linked by id; a retired task says so; an id no task has is shown unlinked
    assert table_rows(html, "top-results") == [     # one click each: by id
        f'<td><a href="/admin/tasks/{RETIRED}">Waitlist</a> (retired)</td><td>1</td>',
        '<td><a href="/admin/tasks/family.resource-directory">Community Resource Directory</a></td><td>1</td>',
        f'<td><span class="gone">{GONE} (not in the catalog)</span></td><td>1</td>',
    ]
    # the task found after rephrasing, by name too; its test-case link still carries the id
    row = next(r for r in re.findall(r"<tr>(.*?)</tr>", html, re.S) if "xyzzy family resources" in r)
    assert '<a href="/admin/tasks/family.resource-directory">Community Resource Directory</a>' in row
    assert "gold=family.resource-directory" in row
    for developer_words in ("Events without a logged search", "Suggested gold", ">CTR<", "learned.block",
                            "Store revision"):
        assert developer_words not in html, developer_words


def test_versions_say_what_happened_in_words_and_the_catalog_revision_is_the_stores(admin_app):
    store = admin_app.extensions["taskfinder"].store
    editor, csrf = signed_in(admin_app, "eddie")
    answer = editor.post("/admin/tasks/ersea.waitlist/learned/block", data={"query": "wait list", "csrf_token": csrf})
    assert answer.status_code == 302
    version = store.versions(limit=1)[0]
    assert version.kind == "learned.block"    # the code the API and the audit log keep
    listing = editor.get("/admin/versions").get_data(as_text=True)
    row = next(r for r in re.findall(r"<tr>(.*?)</tr>", listing, re.S) if f">{version.id}</a>" in r)
    assert "<td>Learned match blocked</td>" in row
    page = editor.get(f"/admin/versions/{version.id}").get_data(as_text=True)
    assert "<dt>Kind</dt><dd>Learned match blocked</dd>" in page
    assert f"<dt>Catalog revision</dt><dd>{version.store_revision}</dd>" in page
    dashboard = editor.get("/admin/").get_data(as_text=True)
    assert f"<dt>Catalog revision</dt><dd>{store.revision()}</dd>" in dashboard
    for html in (listing, page, dashboard):
        assert "learned.block" not in html and "Store revision" not in html


# -- item 12: tabs and line breaks in one-line fields -------------------------------------------------------
def cases_file(*rows: dict) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def test_tabs_and_line_breaks_in_a_query_or_name_fold_to_one_space():
    data = cases_file({"query": "lead\nscreening", "gold": ["health.lead"]},
                      {"query": "bus\r\n  stop\ttimes ", "gold": []},
                      {"query": "two\t\tspaces", "gold": [], "rationale": "kept\nas\tit is"})
    cases = load_cases_bytes(data, "cases.jsonl", {"health.lead"})
    assert [(c.query, c.rationale) for c in cases] == [("lead screening", ""), ("bus stop times", ""),
                                                        ("two spaces", "kept\nas\tit is")]
    row = {"id": "t.one", "name": "Fuel\tlog\n", "help": "line one\nline two", "aliases": ["gas\r\nreceipts"],
           "category": "trans\nport"}
    [task] = load_tasks_bytes(json.dumps(row).encode(), "catalog.jsonl")
    assert (task.name, task.help, task.aliases, task.category) == ("Fuel log", "line one\nline two",
                                                                   ("gas receipts",), "trans port")
    csv_text = 'id,name,help\nt.two,"Menu\nplanning","a\nb"\n'
    [task] = load_tasks_bytes(csv_text.encode(), "catalog.csv")
    assert (task.name, task.help) == ("Menu planning", "a\nb")


@pytest.mark.parametrize("row, field", [
    ({"query": "lead\x0bscreening", "gold": []}, "query"),          # vertical tab: still refused
    ({"query": "lead\x00screening", "gold": []}, "query"),
    ({"query": "lead\u0085screening", "gold": []}, "query"),         # NEL, a C1 control
    ({"query": "lead", "gold": ["health\n.lead"]}, "gold/0"),       # ids are not folded: a mistake to show
])
def test_other_control_characters_are_still_refused_naming_line_and_field(row, field):
    data = cases_file({"query": "fine", "gold": []}, row)
    with pytest.raises(ImportRejected) as caught:
        load_cases_bytes(data, "cases.jsonl", {"health.lead"})
    assert caught.value.errors[0].startswith(f"line 2: field '{field}': contains a control character")


def test_a_task_id_or_url_with_a_line_break_is_still_refused():
    for row, field in (({"id": "t\none", "name": "A", "help": ""}, "id"),
                       ({"id": "t.one", "name": "A", "help": "", "url": "/a\n/b"}, "url")):
        with pytest.raises(ImportRejected) as caught:
            load_tasks_bytes(json.dumps(row).encode(), "catalog.jsonl")
        assert caught.value.errors[0].startswith(f"line 1: field '{field}': contains a control character")


def test_the_admin_upload_imports_cases_whose_queries_hold_line_breaks(admin_app):
    client, csrf = signed_in(admin_app, "eddie")
    body = cases_file({"query": "folded\nquery\tone", "gold": ["ersea.waitlist"]},
                      {"query": "folded query two\r\n", "gold": []})
    response = client.post("/admin/import", data={"csrf_token": csrf, "kind": "cases",
                                                  "file": (io.BytesIO(body), "log.jsonl")},
                           content_type="multipart/form-data")
    assert response.status_code == 200, response.get_data(as_text=True)
    queries = {c.query: c.gold for c in admin_app.extensions["taskfinder"].store.cases()}
    assert queries["folded query one"] == ("ersea.waitlist",) and queries["folded query two"] == ()
    refused = client.post("/admin/import", data={"csrf_token": csrf, "kind": "cases",
                                                 "file": (io.BytesIO(cases_file({"query": "a\x07bell", "gold": []})),
                                                          "bad.jsonl")},
                          content_type="multipart/form-data")
    assert refused.status_code == 422 and "line 1: field &#39;query&#39;: contains a control character" in \
        refused.get_data(as_text=True)
    assert "a\x07bell" not in {c.query for c in admin_app.extensions["taskfinder"].store.cases()}


# -- item 13: `app.py search` before the database is set up ------------------------------------------------
def unmigrated_app(tmp_path, cache_dir, url: str | None):
    from app import create_app

    return create_app(make_settings(tmp_path, cache_dir, **({"DATABASE_URL": url} if url else {})))


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_search_on_a_database_never_set_up_says_what_to_run(kind, tmp_path, shared_cache_dir):
    with postgres_schema() if kind == "postgresql" else nullcontext((None, None)) as (_schema, url):
        app = unmigrated_app(tmp_path, shared_cache_dir, url)
        try:
            result = app.test_cli_runner().invoke(args=["search", "devlopmental screning"])
        finally:
            close_app(app)
    assert result.exit_code == 1, result.output
    assert "has not been set up: run `make run` or `python app.py load-demo` first" in result.output
    assert "Traceback" not in result.output and "store_revision" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_search_on_a_database_behind_the_code_says_to_upgrade(tmp_path, shared_cache_dir):
    engine = db.make_engine(f"sqlite:///{tmp_path / 'taskfinder.db'}")
    db.upgrade(engine, "0014")
    engine.dispose()
    app = unmigrated_app(tmp_path, shared_cache_dir, None)
    try:
        result = app.test_cli_runner().invoke(args=["search", "waitlist"])
    finally:
        close_app(app)
    assert result.exit_code == 1
    assert "is at migration 0014" in result.output and "run `python app.py db upgrade` first" in result.output


def test_search_on_a_database_it_cannot_reach_says_so(tmp_path, shared_cache_dir):
    app = unmigrated_app(tmp_path, shared_cache_dir, "postgresql+psycopg://postgres@127.0.0.1:1/none")
    try:
        result = app.test_cli_runner().invoke(args=["search", "waitlist"])
    finally:
        close_app(app)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.startswith("Error: cannot open the database postgresql+psycopg://postgres@127.0.0.1:1/none:")


def test_the_real_command_line_prints_one_line_not_a_traceback(tmp_path, shared_cache_dir):
    env = {**os.environ, "TASKFINDER_DATA_DIR": str(tmp_path), "CACHE_DIR": str(shared_cache_dir), "AUTO_FIT": "0"}
    env.pop("DATABASE_URL", None)
    done = subprocess.run([sys.executable, str(PROJECT_ROOT / "app.py"), "search", "waitlist"], env=env,
                          capture_output=True, text=True, timeout=120, cwd=PROJECT_ROOT)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"Error: the database sqlite:///{tmp_path / 'taskfinder.db'} has not been set up: run `make run` or "
        "`python app.py load-demo` first (or `python app.py db upgrade` for an empty catalog)"]


def test_search_on_a_migrated_database_still_answers(tmp_path, shared_cache_dir, demo_tasks, demo_cases):
    app = build_app(make_settings(tmp_path, shared_cache_dir, EMBEDDINGS_ENABLED="0"), demo_tasks, demo_cases)
    try:
        result = app.test_cli_runner().invoke(args=["search", "waitlist", "--json", "--no-rerank"])
    finally:
        close_app(app)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["results"]


# -- a record's page lists all of its history --------------------------------------------------------------
def _history_section(html: str) -> str:
    return html.split("<h2>History</h2>", 1)[1].split("</ul>", 1)[0]


@pytest.fixture
def tiny_app(tmp_path, shared_cache_dir):
    """Two tasks and one case on a fresh SQLite store, with a viewer `vera`."""
    from catalog.records import CaseRecord, TaskRecord
    from tests.conftest import ADMIN_PASSWORD

    tasks = [TaskRecord("a.one", "Enrollment form", "Enroll a child", "enrollment"),
             TaskRecord("b.two", "Attendance", "Daily attendance", "attendance")]
    app = build_app(make_settings(tmp_path, shared_cache_dir, SECRET_KEY="k" * 40), tasks,
                    [CaseRecord("who came today", ("b.two",), "came = attendance", "natural_language")])
    services = app.extensions["taskfinder"]
    services.accounts.hasher = FAST_HASHER
    services.accounts.create_user("vera", ADMIN_PASSWORD, "viewer", actor="cli:test")
    yield app
    close_app(app)


def test_a_case_page_lists_the_version_that_made_it_after_205_later_versions(tiny_app):
    """Its "History" read the versions touching it among the newest 200 only ("none recorded"
    once 200 others came after); now CatalogStore.record_history, every version that touched it."""
    from dataclasses import replace

    from catalog.records import CaseRecord

    store = tiny_app.extensions["taskfinder"].store
    case = store.add_case(CaseRecord("enroll a kid", ("a.one",), "enroll = enrollment", "synonym"))
    made = store.versions(limit=1)[0]
    other = next(c for c in store.cases() if c.id != case.id)
    for n in range(205):
        other = store.update_case(other.id, other.version, replace(other, rationale=f"edit {n}"))
    client, _ = signed_in(tiny_app, "vera")
    history = _history_section(client.get(f"/admin/cases/{case.id}").get_data(as_text=True))
    assert f'/admin/versions/{made.id}"' in history and f"Version {made.id}<" in history
    assert "none recorded" not in history


def test_a_task_page_lists_every_version_that_changed_the_task_newest_first(tiny_app):
    """A task's page listed its test cases and what use taught it, not its history: its import,
    each edit, its retirement and return are versions of it like a case's."""
    from dataclasses import replace

    store = tiny_app.extensions["taskfinder"].store
    task = store.task("a.one")
    task = store.update_task(task.id, task.version, replace(task, help="Enroll a child in the program"))
    task = store.set_task_active(task.id, task.version, False)
    store.set_task_active(task.id, task.version, True)
    untouched = store.task("b.two")
    client, _ = signed_in(tiny_app, "vera")
    history = _history_section(client.get("/admin/tasks/a.one").get_data(as_text=True))
    mine = [v for v in store.versions(limit=10) if any(c.kind == "task" and c.key == "a.one" for c in v.changes)]
    assert len(mine) == 4   # the import, the edit, retired, back
    assert re.findall(r"Version (\d+)<", history) == [str(v.id) for v in mine]
    for words in ("Task brought back", "Task retired", "Task edited", "Tasks imported"):
        assert words in history
    other = _history_section(client.get(f"/admin/tasks/{untouched.id}").get_data(as_text=True))
    assert re.findall(r"Version (\d+)<", other) == [str(mine[-1].id)]   # only the import touched it
