"""Reverting one version alone ("Revert this change", like `git revert`; issue 32 item 7) on
SQLite and PostgreSQL, through the real admin pages (CSRF forms, editor role):

* reverting a case edit, a task edit, a created case and a deleted case undoes that version
  alone, as a NEW version ("Revert version N", kind "revert") with its audit entry, and leaves
  every later version in place;
* the confirmation page lists exactly the records the revert changes, each with what it goes back
  to (a claim of the product, checked field by field against what the publish then does);
* a revert is refused, naming the record and the later version, where a later version touched
  the same record, where a re-created case would take a query another case holds, or where it
  would leave a case naming a missing task; a confirmation made before somebody else published
  is refused; nothing is written by a refusal;
* the rollback wording says which versions a rollback undoes.
"""
from __future__ import annotations

import html as htmllib
import re
from dataclasses import replace

import pytest

from admin.audit import entries
from catalog.records import CaseRecord, TaskRecord
from catalog.store import RevertRefused, StaleRevert
from tests.conftest import signed_in
from tests.test_admin_editor import case_by_query, case_form, services, task_form, text, upload


# -- reading the confirmation page ---------------------------------------------------------------------
def cell(raw: str) -> str:
    """A table cell as people read it (tags dropped, entities decoded)."""
    return htmllib.unescape(re.sub(r"<[^>]+>", "", raw)).strip()


def listed(page: str) -> dict[str, tuple[str, list[tuple[str, str, str]]]]:
    """{"case:12": (what the revert does: created|updated|deleted, [(field, now, after the revert)])}
    of every record the revert page lists."""
    found = {}
    for section in page.split('<section class="change revert"')[1:]:
        record, action = re.match(r'\s*data-record="([^"]+)" data-action="(\w+)"', section).groups()
        rows = re.findall(r'<tr class="changed" data-field="(\w+)"><th scope="row">\w+</th><td>(.*?)</td>'
                          r'<td>(.*?)</td></tr>', section.split("</section>")[0], re.S)
        found[htmllib.unescape(record)] = (action, [(f, cell(a), cell(b)) for f, a, b in rows])
    return found


def based_on(page: str) -> str:
    return re.search(r'name="based_on" value="(\d+)"', page).group(1)


def newest(app):
    return services(app).store.versions(limit=1)[0]


def confirm(client, csrf, version_id: int, page: str, **extra):
    """Press "Revert" on a confirmation page."""
    return client.post(f"/admin/versions/{version_id}/revert",
                       data={"csrf_token": csrf, "confirm": "1", "based_on": based_on(page), **extra})


def assert_published_revert(app, version_id: int, response) -> None:
    """The revert is a new version with its message and audit entry, and the page goes there."""
    revert = newest(app)
    assert response.status_code == 302 and response.headers["Location"] == f"/admin/versions/{revert.id}"
    assert (revert.kind, revert.actor, revert.message) == ("revert", "user:eddie", f"Revert version {version_id}")
    audit = entries(services(app).store.engine, limit=1)[0]
    assert (audit.action, audit.actor, audit.after["version"]) == ("catalog.revert", "user:eddie", revert.id)


# -- the four kinds of change ---------------------------------------------------------------------------
def test_reverting_a_case_edit_undoes_that_version_alone(admin_app):
    client, csrf = signed_in(admin_app, "eddie")
    store = services(admin_app).store
    case = case_by_query(admin_app, "criminal history clearance")
    assert client.post("/admin/cases/publish", data=case_form(case, csrf, rationale="edited, to revert",
                                                              gold=["hr.background-checks", "hr.orientation"])
                       ).status_code == 302
    edit = newest(admin_app).id
    task = store.task("gov.program-goals")
    later = task_form(task, csrf, name="Program goals (later edit)")
    assert client.post("/admin/tasks/publish", data=later).status_code == 302

    page = client.get(f"/admin/versions/{edit}/revert")
    html = text(page)
    assert page.status_code == 200 and "Nothing is changed yet" in html
    assert listed(html) == {f"case:{case.id}": ("updated", [
        ("gold", "hr.background-checks, hr.orientation", "hr.background-checks"),
        ("rationale", "edited, to revert", case.rationale)])}
    assert "Preview of this change" in html, "the ranking preview of the revert, as for any edit"
    assert newest(admin_app).id == edit + 1, "the page publishes nothing"

    response = confirm(client, csrf, edit, html)
    assert_published_revert(admin_app, edit, response)
    restored = store.case(case.id)
    assert (restored.gold, restored.rationale) == (case.gold, case.rationale)
    assert restored.version == case.version + 2, "record versions only move forward"
    assert store.task("gov.program-goals").name == "Program goals (later edit)", "the later version stays"
    assert f"Reverted version {edit} alone" in text(client.get(response.headers["Location"]))


def test_reverting_a_task_edit_puts_the_task_back_and_keeps_a_later_case_edit(admin_app):
    client, csrf = signed_in(admin_app, "eddie")
    store = services(admin_app).store
    task = store.task("gov.policy-council-roster")
    assert client.post("/admin/tasks/publish", data=task_form(task, csrf, name="Council roster (revert test)",
                                                              aliases="council list")).status_code == 302
    edit = newest(admin_app).id
    case = case_by_query(admin_app, "new hire onboarding")
    later = case_form(case, csrf, rationale="later case edit")
    assert client.post("/admin/cases/publish", data=later).status_code == 302

    html = text(client.get(f"/admin/versions/{edit}/revert"))
    [(record, (action, fields))] = listed(html).items()
    assert (record, action) == ("task:gov.policy-council-roster", "updated")
    assert fields == [("name", "Council roster (revert test)", task.name),
                      ("aliases", "council list", ", ".join(task.aliases))]
    assert_published_revert(admin_app, edit, confirm(client, csrf, edit, html))
    restored = store.task(task.id)
    assert (restored.name, restored.aliases) == (task.name, task.aliases)
    assert store.case(case.id).rationale == "later case edit"


def test_reverting_a_created_case_deletes_it(admin_app):
    client, csrf = signed_in(admin_app, "eddie")
    store = services(admin_app).store
    form = {"csrf_token": csrf, "action": "save", "case_id": "", "base_version": "", "query": "revert me please",
            "gold_add": "transport.bus-routes", "rationale": "made to be reverted", "category": "synonym"}
    assert client.post("/admin/cases/publish", data=form).status_code == 302
    created, case = newest(admin_app).id, case_by_query(admin_app, "revert me please")

    html = text(client.get(f"/admin/versions/{created}/revert"))
    assert listed(html) == {f"case:{case.id}": ("deleted", [
        ("query", "revert me please", "—"), ("gold", "transport.bus-routes", "—"),
        ("rationale", "made to be reverted", "—"), ("category", "synonym", "—")])}
    assert "Delete test case" in html and f"Version {created} created it; the revert deletes it." in html
    assert_published_revert(admin_app, created, confirm(client, csrf, created, html))
    assert all(c.query != "revert me please" for c in store.cases())


def test_reverting_a_deleted_case_brings_it_back_with_its_id(admin_app):
    client, csrf = signed_in(admin_app, "eddie")
    store = services(admin_app).store
    case = case_by_query(admin_app, "milk substitution")
    assert client.post("/admin/cases/publish", data=case_form(case, csrf, action="delete")).status_code == 302
    deleted = newest(admin_app).id

    html = text(client.get(f"/admin/versions/{deleted}/revert"))
    assert listed(html) == {f"case:{case.id}": ("created", [
        ("query", "—", case.query), ("gold", "—", ", ".join(case.gold)),
        ("rationale", "—", case.rationale), ("category", "—", case.category)])}
    assert "Bring back test case" in html
    assert_published_revert(admin_app, deleted, confirm(client, csrf, deleted, html))
    back = store.case(case.id)
    assert replace(back, version=case.version) == case and back.version == case.version + 1
    services(admin_app).search.live(wait=True)
    assert client.get("/api/search", query_string={"q": case.query, "k": 1}).get_json()["results"][0]["id"] \
        == case.gold[0], "the re-created case pins its gold again"


# -- what the page claims is exactly what the publish does ----------------------------------------------
def test_the_page_lists_exactly_what_a_many_record_revert_changes(admin_app):
    """An upload touching three records (one case edited, one created, one task edited in a
    second upload that is not reverted): the page lists exactly the upload's two case records,
    and after the publish the catalog differs from before the revert in exactly those fields."""
    client, csrf = signed_in(admin_app, "eddie")
    store = services(admin_app).store
    edited = case_by_query(admin_app, "bus stops")
    body = ('{"query": "bus stops", "gold": ["transport.bus-routes", "transport.pickup-authorization"], '
            '"rationale": "upload edit", "category": "synonym"}\n'
            '{"query": "a brand new uploaded case", "gold": ["hr.orientation"], "rationale": "upload new"}\n')
    assert upload(client, csrf, "cases", "two.jsonl", body.encode()).status_code == 200
    version = newest(admin_app).id
    new_case = case_by_query(admin_app, "a brand new uploaded case")
    task = store.task("gov.parent-committee")
    assert client.post("/admin/tasks/publish", data=task_form(task, csrf, help="later help")).status_code == 302

    html = text(client.get(f"/admin/versions/{version}/revert"))
    shown = listed(html)
    assert set(shown) == {f"case:{edited.id}", f"case:{new_case.id}"}
    assert shown[f"case:{edited.id}"] == ("updated", [
        ("gold", "transport.bus-routes, transport.pickup-authorization", "transport.bus-routes"),
        ("rationale", "upload edit", edited.rationale)])
    assert shown[f"case:{new_case.id}"][0] == "deleted"
    assert (f"undoes version {version}'s own changes to 2 records, and nothing else: every other version's "
            "changes stay") in htmllib.unescape(" ".join(html.split()))

    before = {c.id: c for c in store.cases()}
    assert_published_revert(admin_app, version, confirm(client, csrf, version, html))
    after = {c.id: c for c in store.cases()}
    assert set(before) - set(after) == {new_case.id} and set(after) <= set(before)
    changed = {i for i in after if replace(after[i], version=0) != replace(before[i], version=0)}
    assert changed == {edited.id}, "the revert changed exactly the records its page listed"
    assert (after[edited.id].gold, after[edited.id].rationale) == (edited.gold, edited.rationale)
    assert store.task(task.id).help == "later help"


# -- refusals --------------------------------------------------------------------------------------------
def test_a_revert_is_refused_where_a_later_version_touched_the_same_record(admin_app):
    client, csrf = signed_in(admin_app, "eddie")
    store = services(admin_app).store
    case = case_by_query(admin_app, "audit findings")
    assert client.post("/admin/cases/publish", data=case_form(case, csrf, rationale="first edit")).status_code == 302
    first = newest(admin_app).id
    case = store.case(case.id)
    assert client.post("/admin/cases/publish", data=case_form(case, csrf, rationale="second edit")).status_code == 302
    second = newest(admin_app).id

    page = client.get(f"/admin/versions/{first}/revert")
    html = text(page)
    wanted = (f"test case #{case.id} \u201caudit findings\u201d was changed again by version {second} "
              f"(after version {first})")
    assert page.status_code == 200 and wanted in htmllib.unescape(html)
    assert listed(html) == {} and 'name="confirm"' not in html, "nothing to confirm"
    forced = client.post(f"/admin/versions/{first}/revert",
                         data={"csrf_token": csrf, "confirm": "1", "based_on": str(second)})
    assert forced.status_code == 409 and wanted in htmllib.unescape(text(forced))
    assert newest(admin_app).id == second and store.case(case.id).rationale == "second edit", "nothing written"

    # the later change can be reverted on its own (it is the newest to touch the record)
    html = text(client.get(f"/admin/versions/{second}/revert"))
    assert_published_revert(admin_app, second, confirm(client, csrf, second, html))
    assert store.case(case.id).rationale == "first edit"


def test_a_revert_confirmed_before_a_later_publish_is_refused(admin_app):
    client, csrf = signed_in(admin_app, "eddie")
    store = services(admin_app).store
    case = case_by_query(admin_app, "board of directors")
    assert client.post("/admin/cases/publish", data=case_form(case, csrf, rationale="stale test")).status_code == 302
    version = newest(admin_app).id
    html = text(client.get(f"/admin/versions/{version}/revert"))
    other = store.task("gov.governance-training")
    assert client.post("/admin/tasks/publish", data=task_form(other, csrf, help="meanwhile")).status_code == 302
    stale = confirm(client, csrf, version, html)
    assert stale.status_code == 409 and "review what it changes again" in text(stale)
    assert store.case(case.id).rationale == "stale test", "a stale confirmation changes nothing"
    assert_published_revert(admin_app, version, confirm(client, csrf, version, text(stale)))
    assert store.case(case.id).rationale == case.rationale


def test_viewers_may_look_but_not_revert(admin_app):
    client, csrf = signed_in(admin_app, "vera")
    version = newest(admin_app)
    assert "Revert this change" not in text(client.get(f"/admin/versions/{version.id}"))
    assert "Only editors can revert" in text(client.get(f"/admin/versions/{version.id}/revert"))
    assert client.post(f"/admin/versions/{version.id}/revert",
                       data={"csrf_token": csrf, "confirm": "1", "based_on": str(version.id)}).status_code == 403
    assert newest(admin_app) == version


# -- the wording of the version page and the rollback ------------------------------------------------------
def test_the_version_page_offers_a_revert_and_says_which_versions_a_rollback_undoes(admin_app):
    client, csrf = signed_in(admin_app, "eddie")
    store = services(admin_app).store
    mark = newest(admin_app).id
    for name in ("English learners", "kindergarten readiness"):
        case = case_by_query(admin_app, name)
        assert client.post("/admin/cases/publish", data=case_form(case, csrf, rationale=f"{name}: wording")
                           ).status_code == 302
    later = [v.id for v in store.versions(limit=2)][::-1]
    page = text(client.get(f"/admin/versions/{mark}"))
    assert "Revert this change" in page and f"undoes version {mark} alone" in page
    assert f"Review a rollback to version {mark} (undo versions {later[0]} and {later[1]})" in page
    rollback = " ".join(text(client.get(f"/admin/versions/{mark}/rollback")).split())
    assert (f"Rolling back to version {mark} undoes versions {later[0]} and {later[1]}: every version "
            f"published after version {mark}, not version {mark} itself") in rollback
    assert f"Roll back: undo versions {later[0]} and {later[1]} (2 records)" in rollback
    assert "<strong>revert that change</strong> alone" in text(client.get("/admin/versions"))


# -- the store's other refusals (a clash with a later record) ----------------------------------------------
def test_a_revert_is_refused_where_it_would_clash_with_a_later_record(store):
    store.import_tasks([TaskRecord("a.one", "One", "first"), TaskRecord("b.two", "Two", "second")])
    store.import_cases([CaseRecord("alpha", ("a.one",), "r")])
    case = store.cases()[0]
    store.update_case(case.id, case.version, replace(case, query="beta"))
    renamed = store.versions(limit=1)[0].id
    taken = store.add_case(CaseRecord("alpha", ("b.two",), "took the old query"))
    took = store.versions(limit=1)[0].id
    plan = store.revert_plan(renamed)
    assert plan.refused and plan.changes == ()
    with pytest.raises(RevertRefused) as caught:
        store.revert(renamed)
    assert (f"test case #{case.id} \u201calpha\u201d would take the query that test case #{taken.id} holds now, "
            f"set by version {took}") in str(caught.value)

    store.add_task(TaskRecord("c.three", "Three", "third"))
    added = store.versions(limit=1)[0].id
    named = store.add_case(CaseRecord("gamma", ("c.three",), "names the new task"))
    with pytest.raises(RevertRefused) as caught:
        store.revert(added)
    assert (f"test case #{named.id} \u201cgamma\u201d would name task c.three, which would not exist; see version "
            f"{store.versions(limit=1)[0].id}") in str(caught.value)
    assert store.task("c.three").name == "Three", "nothing written"
    with pytest.raises(StaleRevert):
        store.revert(took, based_on=took - 1)
