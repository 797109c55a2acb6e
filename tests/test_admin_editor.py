"""The lexicon editor over HTTP (Flask test client) on SQLite and PostgreSQL: edit -> preview ->
publish, versions and audit entries, conflicts with nothing lost, retiring tasks, deleting cases,
rollback restoring the exact earlier rankings, import errors on the page, export, the picker
and the browse search. Each test works on its own demo cases and tasks (the app is shared by
the module)."""
import io
import json
import re
from dataclasses import replace

import pytest

from admin.audit import entries
from tests.conftest import signed_in


def services(app):
    return app.extensions["taskfinder"]


def case_by_query(app, query):
    return next(c for c in services(app).store.cases() if c.query == query)


def case_form(case, csrf, **changes) -> dict:
    """The fields the case edit form posts."""
    form = {"csrf_token": csrf, "action": "save", "case_id": str(case.id), "base_version": str(case.version),
            "query": case.query, "gold": list(case.gold), "rationale": case.rationale,
            "category": case.category or "", "message": ""}
    form.update(changes)
    return form


def task_form(task, csrf, **changes) -> dict:
    form = {"csrf_token": csrf, "action": "save", "task_id": task.id, "base_version": str(task.version),
            "name": task.name, "help": task.help, "category": task.category or "", "aliases": "\n".join(task.aliases),
            "url": task.url or "", "roles": ", ".join(task.roles), "message": ""}
    form.update(changes)
    return form


def top(client, query, k=10) -> list[tuple[str, float]]:
    """(id, score) of /api/search, served from an index at the store's current revision."""
    services(client.application).search.live(wait=True)
    body = client.get("/api/search", query_string={"q": query, "k": k}).get_json()
    return [(r["id"], r["score"]) for r in body["results"]]


def text(response) -> str:
    return response.get_data(as_text=True)


# -- edit, preview, publish --------------------------------------------------------------------------
def test_a_case_edit_is_previewed_then_published_as_a_version_with_its_audit_entry(admin_app):
    client, csrf = signed_in(admin_app, "eddie")
    case = case_by_query(admin_app, "Bus Route Management")
    form = case_form(case, csrf, gold=["health.lead-screening"], rationale="bus = lead, for this test",
                     message="test edit")
    page = client.get(f"/admin/cases/{case.id}/edit")
    assert page.status_code == 200 and f'name="base_version" value="{case.version}"' in text(page)

    preview = client.post("/admin/cases/preview", data=form)
    assert preview.status_code == 200
    html = text(preview)
    assert "Preview: Edit test case" in html and "health.lead-screening" in html and "transport.bus-routes" in html
    assert "Preview of this change" in html and "Cross-validated suite" in html   # admin.preview's report
    assert re.search(r"<caption>“Bus Route Management”", html), "the edited query ranked before/after"
    assert case_by_query(admin_app, "Bus Route Management") == case, "a preview publishes nothing"
    assert f'name="base_version" value="{case.version}"' in html  # the publish form carries the base version

    published = client.post("/admin/cases/publish", data=form)
    assert published.status_code == 302 and published.headers["Location"] == f"/admin/cases/{case.id}"
    stored = case_by_query(admin_app, "Bus Route Management")
    assert stored.gold == ("health.lead-screening",) and stored.version == case.version + 1
    assert top(client, "Bus Route Management", 1)[0][0] == "health.lead-screening"  # the test case pins it

    version = services(admin_app).store.versions(limit=1)[0]
    assert (version.kind, version.actor, version.message) == ("case.update", "user:eddie", "test edit")
    assert version.changes[0].fields()[0] == ("gold", ["transport.bus-routes"], ["health.lead-screening"])
    [audit] = entries(services(admin_app).store.engine, target=f"case:{case.id}", limit=1)
    assert (audit.actor, audit.action) == ("user:eddie", "catalog.case.update")
    assert audit.before["records"][f"case:{case.id}"]["gold"] == ["transport.bus-routes"]
    assert audit.after["records"][f"case:{case.id}"]["gold"] == ["health.lead-screening"]
    assert audit.after["version"] == version.id
    history = text(client.get(f"/admin/versions/{version.id}"))
    assert "transport.bus-routes" in history and "health.lead-screening" in history


def test_new_case_form_takes_its_prefill_from_the_query_string(admin_app):
    client, _ = signed_in(admin_app, "vera")
    html = text(client.get("/admin/cases/new?query=head+count&gold=ersea.waitlist&gold=nope.unknown"))
    assert 'name="query" value="head count"' in html
    assert 'name="gold" value="ersea.waitlist" checked' in html and "nope.unknown" not in html


def test_a_new_case_is_created_and_invalid_input_names_the_field(admin_app):
    client, csrf = signed_in(admin_app, "eddie")
    bad = client.post("/admin/cases/preview", data={"csrf_token": csrf, "query": "  ", "gold": ["no.such-task"],
                                                     "category": "made-up"})
    assert bad.status_code == 422
    assert "field &#39;gold&#39;" in text(bad) or "field &#39;category&#39;" in text(bad)
    form = {"csrf_token": csrf, "action": "save", "case_id": "", "base_version": "", "query": "kids on the bus",
            "gold_add": "transport.bus-routes", "rationale": "bus = transport", "category": "synonym"}
    assert client.post("/admin/cases/preview", data=form).status_code == 200
    assert client.post("/admin/cases/publish", data=form).status_code == 302
    assert case_by_query(admin_app, "kids on the bus").gold == ("transport.bus-routes",)
    again = client.post("/admin/cases/publish", data=form)
    assert again.status_code == 409 and "already has the query" in text(again)


def test_viewers_may_preview_but_not_publish(admin_app):
    client, csrf = signed_in(admin_app, "vera")
    case = case_by_query(admin_app, "Lead Screening")
    form = case_form(case, csrf, rationale="viewer was here")
    preview = client.post("/admin/cases/preview", data=form)
    assert preview.status_code == 200 and "Only editors can publish" in text(preview)
    assert client.post("/admin/cases/publish", data=form).status_code == 403
    assert case_by_query(admin_app, "Lead Screening") == case


# -- conflicts -----------------------------------------------------------------------------------------
def test_a_stale_case_publish_gets_the_conflict_page_and_the_merge_loses_nothing(admin_app):
    ann, ann_csrf = signed_in(admin_app, "eddie")
    bob, bob_csrf = signed_in(admin_app, "eddie")
    case = case_by_query(admin_app, "PIR Report")
    assert ann.post("/admin/cases/publish", data=case_form(case, ann_csrf, rationale="Ann's rationale")).status_code == 302

    conflict = bob.post("/admin/cases/publish", data=case_form(case, bob_csrf, gold=["reporting.pir", "ersea.waitlist"]))
    assert conflict.status_code == 409
    html = text(conflict)
    assert "Ann&#39;s rationale" in html                                     # theirs
    assert "reporting.pir, ersea.waitlist" in html                           # yours
    assert f'name="base_version" value="{case.version + 1}"' in html         # the merge is based on theirs
    assert case_by_query(admin_app, "PIR Report").rationale == "Ann's rationale"  # nothing overwritten

    merged = case_form(case_by_query(admin_app, "PIR Report"), bob_csrf, gold=["reporting.pir", "ersea.waitlist"])
    assert bob.post("/admin/cases/publish", data=merged).status_code == 302
    final = case_by_query(admin_app, "PIR Report")
    assert final.rationale == "Ann's rationale" and final.gold == ("reporting.pir", "ersea.waitlist")


def test_a_stale_task_publish_gets_the_conflict_page(admin_app):
    client, csrf = signed_in(admin_app, "eddie")
    task = services(admin_app).store.task("health.hearing-screening")
    assert client.post("/admin/tasks/publish", data=task_form(task, csrf, name="Hearing Screening (OAE)")).status_code == 302
    conflict = client.post("/admin/tasks/publish", data=task_form(task, csrf, help="Mine: audiometry results"))
    assert conflict.status_code == 409
    assert "Hearing Screening (OAE)" in text(conflict) and "Mine: audiometry results" in text(conflict)
    assert services(admin_app).store.task("health.hearing-screening").help == task.help


# -- tasks: edit, retire ----------------------------------------------------------------------------------
def test_retiring_a_task_flags_its_cases_and_takes_it_out_of_search(admin_app):
    client, csrf = signed_in(admin_app, "eddie")
    store = services(admin_app).store
    task = store.task("nutrition.cacfp-meal-count")
    naming = [c for c in store.cases() if task.id in c.gold]
    assert naming and top(client, "CACFP Meal Count", 3)[0][0] == task.id

    preview = client.post("/admin/tasks/preview", data={"csrf_token": csrf, "action": "retire", "task_id": task.id,
                                                        "base_version": str(task.version)})
    assert preview.status_code == 200 and "Preview: Retire task" in text(preview)
    assert "CACFP Meal Count" in text(preview), "the queries of the cases naming the task are previewed"
    published = client.post("/admin/tasks/publish", data={"csrf_token": csrf, "action": "retire",
                                                          "task_id": task.id, "base_version": str(task.version)})
    assert published.status_code == 302 and not store.task(task.id).active
    assert store.versions(limit=1)[0].kind == "task.retire"

    assert task.id not in [i for i, _ in top(client, "CACFP Meal Count", 10)]   # the index tolerates its cases
    task_page = text(client.get(f"/admin/tasks/{task.id}"))
    n = len(naming)
    assert (f"1 test case still names it" if n == 1 else f"{n} test cases still name it") in task_page and "names this retired task" in task_page
    assert re.search(r"\b1 case still names it|\d+ cases still name it", text(client.get("/admin/tasks?status=inactive")))
    assert "retired" in text(client.get(f"/admin/cases?task={task.id}"))
    assert "retired task" in text(client.get(f"/admin/cases/{naming[0].id}/edit"))
    assert set(store.cases_naming_retired()) >= {c.id for c in naming}

    reinstate = {"csrf_token": csrf, "action": "reinstate", "task_id": task.id,
                 "base_version": str(store.task(task.id).version)}
    assert client.post("/admin/tasks/publish", data=reinstate).status_code == 302
    assert store.task(task.id).active and top(client, "CACFP Meal Count", 1)[0][0] == task.id


def test_a_new_task_and_a_task_edit(admin_app):
    client, csrf = signed_in(admin_app, "eddie")
    new = {"csrf_token": csrf, "action": "save", "base_version": "", "task_id": "zz.fleet-fuel",
           "name": "Fleet Fuel Log", "help": "Record fuel purchases for buses", "category": "transport",
           "aliases": "fuel log\ngas receipts", "url": "/transport/fuel", "roles": ""}
    assert client.post("/admin/tasks/preview", data=new).status_code == 200
    assert client.post("/admin/tasks/publish", data=new).status_code == 302
    task = services(admin_app).store.task("zz.fleet-fuel")
    assert task.aliases == ("fuel log", "gas receipts") and task.active
    assert top(client, "gas receipts", 1)[0][0] == "zz.fleet-fuel"
    edited = task_form(task, csrf, roles="fiscal, director")
    assert client.post("/admin/tasks/publish", data=edited).status_code == 302
    assert services(admin_app).store.task("zz.fleet-fuel").roles == ("fiscal", "director")
    assert "zz.fleet-fuel" not in [i for i, _ in top(client, "gas receipts")]  # restricted now
    bad = client.post("/admin/tasks/preview", data={**new, "task_id": "has space inside ", "name": ""})
    assert bad.status_code == 422 and "field &#39;name&#39;" in text(bad)


def test_deleting_a_case_goes_through_a_preview(admin_app):
    client, csrf = signed_in(admin_app, "eddie")
    case = case_by_query(admin_app, "Family Partnership Agreement")
    form = case_form(case, csrf, action="delete")
    assert "Preview: Delete test case" in text(client.post("/admin/cases/preview", data=form))
    assert client.post("/admin/cases/publish", data=form).status_code == 302
    assert all(c.query != case.query for c in services(admin_app).store.cases())
    assert services(admin_app).store.versions(limit=1)[0].kind == "case.delete"


def test_the_preview_page_views_as_the_public_by_default_and_as_a_chosen_role(admin_app):
    """Issue 19 item 2 over HTTP: the view is the public's unless the form picks a role some
    task has (anything else is the public's), and a restricted gold is warned about."""
    client, csrf = signed_in(admin_app, "vera")   # viewers may preview
    case = case_by_query(admin_app, "background checks")
    form = case_form(case, csrf)
    public = text(client.post("/admin/cases/preview", data=form))
    assert "what an anonymous user (the public) would see" in public
    assert "will not see this gold task" in public and '<option value="" selected>' in public
    for bogus in ("nobody", "*x"):
        assert "will not see this gold task" in text(client.post("/admin/cases/preview", data={**form, "view_as": bogus}))
    hr = text(client.post("/admin/cases/preview", data={**form, "view_as": "hr"}))
    assert "what a user with the role &#39;hr&#39; would see" in hr and "will not see" not in hr
    assert '<option value="hr" selected>' in hr
    assert 'name="view_as"' in hr and 'name="publish"' not in hr   # a viewer: the switch, no publish


# -- rollback ---------------------------------------------------------------------------------------------
QUERIES = ["Waitlist", "eligibility", "developmental screening", "bus", "parent involvement", "meal count"]


def test_rollback_restores_the_exact_rankings_and_the_fit_of_that_data(admin_app):
    """Search, edit a case and a task (and a new fit lands for the new data, as the background
    refit would store it), roll back: the same ids and scores as before, ranked by the fit that
    was made on the restored data rather than the newest one."""
    client, csrf = signed_in(admin_app, "eddie")
    store, search = services(admin_app).store, services(admin_app).search
    live = search.live(wait=True)
    base_params = search.defaults.as_dict()
    fit_a = store.save_fit(store.revision(), live.digest, scaled(base_params, 1.3), {"status": "fitted"})
    mark = store.versions(limit=1)[0].id
    before = {q: top(client, q) for q in QUERIES}
    assert search.live().params.fit_id == fit_a

    case = case_by_query(admin_app, "Waitlist")
    assert client.post("/admin/cases/publish", data=case_form(case, csrf, gold=["health.asq3-screening"],
                                                              query="wait list")).status_code == 302
    task = store.task("ersea.eligibility-determination")
    assert client.post("/admin/tasks/publish", data=task_form(task, csrf, name="Means test",
                                                              aliases="")).status_code == 302
    newer = search.live(wait=True)
    fit_b = store.save_fit(store.revision(), newer.digest, scaled(base_params, 0.6), {"status": "fitted"})
    edited = {q: top(client, q) for q in QUERIES}
    assert search.live().params.fit_id == fit_b and edited != before

    response = client.post(f"/admin/versions/{mark}/rollback", data={"csrf_token": csrf})
    assert response.status_code == 200 and "Roll back to version" in text(response), "a click only asks"
    assert {q: top(client, q) for q in QUERIES} == edited
    response = client.post(f"/admin/versions/{mark}/rollback",
                           data={"csrf_token": csrf, "confirm": "1", "based_on": rollback_base(text(response))})
    assert response.status_code == 302
    rollback = store.versions(limit=1)[0]
    assert (rollback.kind, rollback.rollback_of, rollback.actor) == ("rollback", mark, "user:eddie")
    after = {q: top(client, q) for q in QUERIES}
    assert search.live().params.fit_id == fit_a, "the fit made on the restored data ranks again"
    assert after == before
    assert entries(store.engine, limit=1)[0].action == "catalog.rollback"


def rollback_base(html: str) -> str:
    """The `based_on` a rollback confirmation page carries."""
    return re.search(r'name="based_on" value="(\d+)"', html).group(1)


MEALS, VOLUNTEER = "meal counts and monthly reimbursement claim", "family.volunteer-hours"


def test_a_rollback_is_confirmed_on_a_page_showing_what_it_undoes(admin_app):
    """The version page shows how the catalog differs from that version now; rolling back asks
    first, listing every change it would undo with its ranking preview; a confirmation made
    before somebody else published is refused and shown again."""
    client, csrf = signed_in(admin_app, "eddie")
    store = services(admin_app).store
    mark = store.versions(limit=1)[0].id
    case = case_by_query(admin_app, MEALS)
    assert client.post("/admin/cases/publish", data=case_form(case, csrf, rationale="meals served per day, "
                                                              "rollback test")).status_code == 302
    original = store.task(VOLUNTEER)
    assert client.post("/admin/tasks/publish", data=task_form(original, csrf, name="Volunteer log (rollback test)")).status_code == 302

    version = text(client.get(f"/admin/versions/{mark}"))
    assert "Compared with the current catalog (2 records differ)" in version
    assert "Volunteer log (rollback test)" in version and "rollback test" in version
    assert "Review a rollback to version" in version

    page = client.get(f"/admin/versions/{mark}/rollback")
    html = text(page)
    assert page.status_code == 200 and "Nothing is changed yet" in html
    assert "these 2 records" in html and "Volunteer log (rollback test)" in html and "<q>meal counts and monthly reimbursement claim</q>" in html
    assert "Preview of this change" in html and "what an anonymous user (the public) would see" in html
    assert store.versions(limit=1)[0].id > mark and store.task(VOLUNTEER).name == "Volunteer log (rollback test)"

    based_on = rollback_base(html)
    task = store.task(VOLUNTEER)
    assert client.post("/admin/tasks/publish", data=task_form(task, csrf, help="edited meanwhile")).status_code == 302
    stale = client.post(f"/admin/versions/{mark}/rollback", data={"csrf_token": csrf, "confirm": "1", "based_on": based_on})
    assert stale.status_code == 409 and "review what it undoes again" in text(stale)
    assert store.task(VOLUNTEER).help == "edited meanwhile", "a stale confirmation changes nothing"

    fresh = rollback_base(text(stale))
    done = client.post(f"/admin/versions/{mark}/rollback", data={"csrf_token": csrf, "confirm": "1", "based_on": fresh})
    assert done.status_code == 302
    restored = store.task(VOLUNTEER)
    assert (restored.name, restored.help) == (original.name, original.help)
    assert case_by_query(admin_app, MEALS).rationale == case.rationale
    assert "This is the current version." in text(client.get(done.headers["Location"]))


def scaled(params: dict, factor: float) -> dict:
    """Stored fit parameters with every fusion weight multiplied by `factor` (a distinct ranking)."""
    params = json.loads(json.dumps(params))
    for mode in params["weights"].values():
        for name in mode:
            mode[name] = mode[name] * factor
    return params


def test_viewers_cannot_roll_back(admin_app):
    client, csrf = signed_in(admin_app, "vera")
    version = services(admin_app).store.versions(limit=1)[0]
    assert client.post(f"/admin/versions/{version.id}/rollback", data={"csrf_token": csrf}).status_code == 403
    assert services(admin_app).store.versions(limit=1)[0] == version
    assert "Roll back to version" not in text(client.get(f"/admin/versions/{version.id}"))


# -- import and export ------------------------------------------------------------------------------------
def upload(client, csrf, kind, name, body: bytes, replace_all=False):
    data = {"csrf_token": csrf, "kind": kind, "file": (io.BytesIO(body), name)}
    if replace_all:
        data["replace"] = "1"
    return client.post("/admin/import", data=data, content_type="multipart/form-data")


def test_an_import_with_bad_lines_shows_every_line_and_field_and_writes_nothing(admin_app):
    client, csrf = signed_in(admin_app, "eddie")
    store = services(admin_app).store
    count, cases = store.version_count(), store.cases()
    body = (b'{"query": "a fine new case", "gold": ["ersea.waitlist"]}\n'
            b'{"query": "bad gold", "gold": ["no.such-task"]}\n'
            b'{"query": "bad category", "gold": [], "category": "vibes"}\n'
            b'not json\n')
    response = upload(client, csrf, "cases", "cases.jsonl", body)
    assert response.status_code == 422
    html = text(response)
    assert "line 2: field &#39;gold&#39;: unknown task id &#39;no.such-task&#39;" in html
    assert "line 3: field &#39;category&#39;" in html and "line 4: invalid JSON" in html
    assert "nothing was imported" in html
    assert store.cases() == cases and store.version_count() == count

    good = upload(client, csrf, "cases", "cases.jsonl", body.splitlines()[0] + b"\n")
    assert good.status_code == 200 and "1 created" in text(good)
    version = store.versions(limit=1)[0]
    assert (version.kind, version.actor) == ("import.cases", "user:eddie") and "cases.jsonl" in version.message
    assert upload(client, csrf, "tasks", "tasks.csv", "id,name\nx,y\n".encode()).status_code == 422  # no help column
    assert upload(client, csrf, "cases", "cases.jsonl", b"\xff\xfe").status_code == 422


def test_export_downloads_every_task_and_case_as_json_lines(admin_app):
    client, _ = signed_in(admin_app, "vera")
    store = services(admin_app).store
    tasks = client.get("/admin/export/tasks.jsonl")
    assert tasks.status_code == 200 and "attachment" in tasks.headers["Content-Disposition"]
    rows = [json.loads(line) for line in text(tasks).splitlines()]
    assert [r["id"] for r in rows] == [t.id for t in store.tasks(include_inactive=True)]
    cases = [json.loads(line) for line in text(client.get("/admin/export/cases.jsonl")).splitlines()]
    assert [c["query"] for c in cases] == [c.query for c in store.cases()]
    assert client.get("/admin/export/users.jsonl").status_code == 404


# -- the product's search inside the admin -----------------------------------------------------------------
def test_the_picker_and_the_browse_pages_rank_with_the_products_search_over_every_role(admin_app):
    client, _ = signed_in(admin_app, "vera")
    service = services(admin_app).search
    service.live(wait=True)
    expected = [r["id"] for r in service.search("CACFP monthly claim", k=10, restrict_roles=False)["results"]]
    public = [r["id"] for r in service.search("CACFP monthly claim", k=10)["results"]]
    picked = [t["id"] for t in client.get("/admin/api/task-search?q=CACFP+monthly+claim").get_json()["tasks"]]
    assert picked[:len(expected)] == expected and set(expected) - set(public), "a restricted task is offered"
    assert client.get("/admin/api/task-search?q=").get_json() == {"tasks": []}
    assert "zz.xss" in [t["id"] for t in client.get("/admin/api/task-search?q=zz.x").get_json()["tasks"]]

    html = text(client.get("/admin/tasks", query_string={"search": "CACFP monthly claim", "status": "all"}))
    listed = re.findall(r'<td><a href="/admin/tasks/([^"]+)">', html)
    assert listed[:len(expected)] == expected
    cases_html = text(client.get("/admin/cases", query_string={"search": "CACFP monthly claim"}))
    assert f'/admin/tasks/{expected[0]}"' in cases_html and "naming the tasks the search ranks" in cases_html


# -- the case page says how the search ranks the case now (issue 44 item 4) -------------------------
def served_list(html: str) -> list[str]:
    """The task ids of the case page's "How the search ranks it now" list, in order."""
    served = re.search(r'<ol class="served">(.*?)</ol>', html, re.S)
    return re.findall(r"<code>([^<]+)</code>", served.group(1)) if served else []


def test_the_case_page_shows_what_the_search_serves_on_a_fresh_database_and_after_a_rollback(admin_app):
    """What the page lists is the live ranking of the case's query (every role's tasks, asked as
    a submitted query: the widget's Enter, typing=0, as every part asks a test case), on the
    database as loaded, after its query is edited, and after a rollback brings it back."""
    services = admin_app.extensions["taskfinder"]
    store, search = services.store, services.search
    client, _csrf = signed_in(admin_app, "vera")
    case = next(c for c in store.cases() if c.query == "Lead Screening")

    def page_and_api(query: str) -> tuple[list[str], list[str]]:
        html = text(client.get(f"/admin/cases/{case.id}"))
        assert "How the search ranks it now" in html
        return served_list(html), [r["id"] for r in search.search(query, k=5, restrict_roles=False,
                                                                  typing=False)["results"]]

    shown, api = page_and_api("Lead Screening")
    assert shown and shown == api
    mark = store.versions(limit=1)[0].id
    edited = store.update_case(case.id, store.case(case.id).version, replace(store.case(case.id), query="blood lead level"),
                               actor="user:eddie")
    shown, api = page_and_api(edited.query)
    assert edited.query == "blood lead level" and shown == api
    store.rollback(mark, actor="user:eddie", based_on=store.versions(limit=1)[0].id)
    shown, api = page_and_api("Lead Screening")
    assert store.case(case.id).query == "Lead Screening" and shown == api
