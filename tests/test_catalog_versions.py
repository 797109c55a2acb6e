"""Catalog versions on SQLite and PostgreSQL: every store write publishes a changeset in its own
transaction, earlier states are reconstructed exactly, rollback restores them as a new version,
stale edits never overwrite (two concurrent editors included), and the ranker fit made on the
restored data is the one that ranks again."""
import threading
from dataclasses import replace

import pytest

from catalog.records import CaseRecord, TaskRecord
from catalog.store import CatalogStore, NotFound, StaleEdit, StaleRollback, StoreConflict
from catalog.versions import case_snapshot, content, records_of, state_of, task_snapshot

TASKS = [TaskRecord("a.one", "Enrollment form", "Enroll a child", "enrollment", ("intake",)),
         TaskRecord("b.two", "Attendance", "Daily attendance", "attendance"),
         TaskRecord("c.three", "Bus route", "Transportation routes", "transport", roles=("fiscal",))]
CASES = [CaseRecord("enroll a kid", ("a.one",), "enroll = enrollment", "synonym"),
         CaseRecord("who came today", ("b.two",), "came = attendance", "natural_language"),
         CaseRecord("lunch menu", (), "", None)]


def contents(tasks, cases) -> dict:
    """A catalog's content (record versions left out): what a rollback restores."""
    state = state_of(tasks, cases)
    return {key: content(key[0], snapshot) for key, snapshot in state.items()}


def now(store: CatalogStore) -> dict:
    return contents(store.tasks(include_inactive=True), store.cases())


@pytest.fixture
def loaded(store):
    store.import_tasks(TASKS, actor="cli:test")
    store.import_cases(CASES, actor="cli:test")
    return store


def test_every_write_publishes_one_version_with_its_changes(loaded):
    store = loaded
    first = store.versions()
    assert [v.kind for v in first] == ["import.cases", "import.tasks"]
    assert [v.actor for v in first] == ["cli:test", "cli:test"]
    assert {c.key for c in first[1].changes} == {"a.one", "b.two", "c.three"}
    assert all(c.before is None and c.after is not None for c in first[0].changes)

    case = store.cases()[0]
    store.update_case(case.id, case.version, replace(case, rationale="enrol, enroll: enrollment"), actor="user:eddie",
                      message="spelling")
    edit = store.versions(limit=1)[0]
    assert (edit.kind, edit.actor, edit.message) == ("case.update", "user:eddie", "spelling")
    [change] = edit.changes
    assert change.key == str(case.id) and change.fields() == [
        ("rationale", "enroll = enrollment", "enrol, enroll: enrollment")]
    assert edit.store_revision == store.revision()

    assert store.import_cases(CASES[1:]) == {"created": 0, "updated": 0, "unchanged": 2}
    assert store.versions(limit=1)[0].id == edit.id, "an import that changes nothing is no new version"


def test_the_state_at_every_version_is_reconstructed_exactly(loaded):
    store = loaded
    seen = {store.versions(limit=1)[0].id: now(store)}

    def remember():
        seen[store.versions(limit=1)[0].id] = now(store)

    case = store.cases()[1]
    store.update_case(case.id, case.version, replace(case, query="who is here today", gold=("b.two", "a.one")))
    remember()
    store.delete_case(store.cases()[2].id, 1)
    remember()
    task = store.task("c.three")
    store.set_task_active("c.three", task.version, False)
    remember()
    store.add_task(TaskRecord("d.four", "Menus", "CACFP menus", "nutrition"))
    store.add_case(CaseRecord("what's for lunch", ("d.four",), "lunch = menu"))
    remember()
    store.import_tasks([*TASKS[:2], replace(TASKS[2], active=False), TaskRecord("d.four", "Menus", "Meal planning")],
                       replace=True)
    remember()
    for version_id, expected in seen.items():
        tasks, cases = store.state_at(version_id)
        assert contents(tasks, cases) == expected, f"state at version {version_id}"
    with pytest.raises(NotFound):
        store.state_at(10_000)


def test_rollback_restores_the_content_as_a_new_version_and_can_be_undone(loaded):
    store = loaded
    target = store.versions(limit=1)[0].id
    before = now(store)
    stale = store.cases()[0]
    store.update_case(stale.id, stale.version, replace(stale, gold=("b.two",)))
    store.delete_case(store.cases()[1].id, 1)
    store.set_task_active("a.one", store.task("a.one").version, False)
    store.update_task("b.two", 1, replace(store.task("b.two"), name="Attendance log", aliases=("sign-in",)))
    edited = now(store)
    assert edited != before

    new_id = store.rollback(target, actor="user:eddie")
    assert now(store) == before
    rollback = store.version(new_id)
    assert (rollback.kind, rollback.rollback_of, rollback.actor) == ("rollback", target, "user:eddie")
    assert {(c.kind, c.action) for c in rollback.changes} == {("case", "updated"), ("case", "created"),
                                                             ("task", "updated")}
    # Record versions only move forward: an editor still holding the pre-rollback page conflicts.
    with pytest.raises(StaleEdit) as caught:
        store.update_case(stale.id, stale.version, replace(stale, rationale="mine"))
    assert caught.value.current.version > stale.version
    recreated = next(c for c in store.cases() if c.query == "who came today")
    assert recreated.version == 2, "a re-created case continues its counter"

    assert store.rollback(new_id) is None, "already in that state: nothing to publish"
    store.rollback(new_id - 1)   # the rollback itself rolled back
    assert now(store) == edited


def test_a_rollback_plan_is_the_diff_to_now_and_a_stale_one_is_refused(loaded):
    """What a rollback would undo is the difference between the catalog now and right after the
    version, not that version's own changes; confirming a plan made before a later publish is
    refused (nothing silently undone that the admin did not see)."""
    store = loaded
    target = store.versions(limit=1)[0].id
    before = now(store)
    first = store.cases()[0]
    store.update_case(first.id, first.version, replace(first, gold=("b.two",)))
    store.update_task("b.two", 1, replace(store.task("b.two"), name="Attendance log"))

    plan = store.rollback_plan(target)
    assert plan.latest == store.versions(limit=1)[0].id and plan.version_id == target
    assert [(c.kind, c.key, c.action) for c in plan.changes] == [("task", "b.two", "updated"),
                                                                 ("case", str(first.id), "updated")]
    assert plan.changes[0].fields() == [("name", "Attendance log", "Attendance")]
    assert plan.changes[1].fields() == [("gold", ["b.two"], ["a.one"])]
    assert contents(plan.tasks, plan.cases) == before
    assert store.version(target).changes != plan.changes
    assert store.rollback_plan(plan.latest).changes == ()

    store.update_task("a.one", 1, replace(store.task("a.one"), help="Enroll a child (edited later)"))
    edited = now(store)
    with pytest.raises(StaleRollback):
        store.rollback(target, based_on=plan.latest)
    assert now(store) == edited, "a stale confirmation changes nothing"
    fresh = store.rollback_plan(target)
    assert len(fresh.changes) == 3
    store.rollback(target, based_on=fresh.latest)
    assert now(store) == before
    with pytest.raises(NotFound):
        store.rollback_plan(10_000)


def test_rollback_copes_with_two_cases_swapping_queries(loaded):
    store = loaded
    target = store.versions(limit=1)[0].id
    before = now(store)
    first, second = store.cases()[:2]
    store.update_case(first.id, first.version, replace(first, query="placeholder"))
    store.update_case(second.id, second.version, replace(second, query=first.query))
    moved = store.case(first.id)
    store.update_case(first.id, moved.version, replace(moved, query=second.query))
    store.rollback(target)
    assert now(store) == before


def test_stale_and_duplicate_edits_are_refused_with_the_current_record(loaded):
    store = loaded
    case = store.cases()[0]
    store.update_case(case.id, case.version, replace(case, rationale="theirs"))
    with pytest.raises(StaleEdit) as caught:
        store.update_case(case.id, case.version, replace(case, rationale="mine"))
    assert caught.value.current.rationale == "theirs"
    with pytest.raises(StaleEdit):
        store.delete_case(case.id, case.version)
    with pytest.raises(StoreConflict, match="already has the query"):
        store.update_case(case.id, case.version + 1, replace(case, query="who came today"))
    with pytest.raises(StaleEdit) as caught:
        store.update_task("a.one", 7, TASKS[0])
    assert caught.value.current.version == 1
    with pytest.raises(StoreConflict, match="already exists"):
        store.add_task(TASKS[0])
    assert store.case(case.id).rationale == "theirs"


def test_two_concurrent_editors_lose_nothing(engine):
    """Two editors (two stores, two threads, released together) save the same case from the
    same version: one wins, the other is refused with the winner's record, merges, and saves."""
    first, second = CatalogStore(engine), CatalogStore(engine)
    first.import_tasks(TASKS)
    first.import_cases(CASES)
    case = first.cases()[0]
    barrier, outcomes = threading.Barrier(2), {}

    def edit(store, who, gold):
        barrier.wait()
        try:
            store.update_case(case.id, case.version, replace(case, gold=gold, rationale=f"by {who}"), actor=who)
            outcomes[who] = "saved"
        except StaleEdit as exc:
            outcomes[who] = exc.current

    threads = [threading.Thread(target=edit, args=(first, "user:ann", ("a.one", "b.two"))),
               threading.Thread(target=edit, args=(second, "user:bob", ("a.one", "c.three")))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    winner = next(who for who, result in outcomes.items() if result == "saved")
    loser = next(who for who in outcomes if who != winner)
    theirs = outcomes[loser]
    assert theirs.rationale == f"by {winner}" and theirs.version == case.version + 1
    merged = tuple(dict.fromkeys(("a.one", "b.two", "c.three")))
    second.update_case(case.id, theirs.version, replace(theirs, gold=merged, rationale="by both"), actor=loser)
    assert first.case(case.id).gold == merged
    edits = [v for v in first.versions() if v.kind == "case.update"]
    assert [v.actor for v in reversed(edits)] == [winner, loser]
    assert edits[1].changes[0].after["rationale"] == f"by {winner}"   # the winner's edit is in the history


def test_the_ranker_fit_made_on_the_same_data_is_preferred(loaded):
    store = loaded
    first = store.save_fit(1, "digest-A", {"marker": "A"}, {})
    store.save_fit(2, "digest-B", {"marker": "B"}, {})
    assert store.fit_for_digest("digest-A").id == first
    assert store.latest_fit().params == {"marker": "B"}
    assert store.fit_for_digest("digest-C") is None


def test_cases_naming_a_retired_task_are_reported(loaded):
    store = loaded
    store.add_case(CaseRecord("roster and bus", ("b.two", "c.three")))
    store.set_task_active("c.three", 1, False)
    flagged = store.cases_naming_retired()
    assert list(flagged.values()) == [("c.three",)]
    assert store.case(next(iter(flagged))).query == "roster and bus"


def test_records_of_round_trips_a_state():
    tasks = [replace(t, version=1) for t in TASKS]
    cases = [replace(c, id=i + 1, version=1) for i, c in enumerate(CASES)]
    assert records_of(state_of(tasks, cases)) == (tasks, cases)
    assert task_snapshot(tasks[0])["aliases"] == ["intake"] and case_snapshot(cases[2])["gold"] == []


def test_the_index_and_the_fit_tolerate_cases_whose_gold_names_a_retired_task(settings, demo_tasks, demo_cases):
    """Retiring a task leaves the cases naming it in place (flagged in the admin): the index is
    built without the task, such a case's query still answers, and the ranker fits around it."""
    from search.fitting import FitOptions, fit_ranker
    from search.index import build_index
    from search.prefilter import prefilter
    from search.query import analyse_query
    from search.ranker import default_params
    from lexicon.rationale import build_lexicon

    retired = "nutrition.cacfp-meal-count"
    tasks = [replace(t, active=t.id != retired) for t in demo_tasks]
    naming = [c for c in demo_cases if retired in c.gold]
    assert naming
    active = [t for t in tasks if t.active]
    index = build_index(active, build_lexicon(demo_cases), settings.field_weights, cases=demo_cases)
    params = default_params(settings)
    for case in naming:
        ranked = prefilter(index, analyse_query(index, case.query), params.weights, 10).ranked
        assert ranked and retired not in [r.task.id for r in ranked]
    fitted_settings = settings.with_overrides(embeddings_enabled=False)
    _, report = fit_ranker(fitted_settings, tasks, demo_cases, None, params, options=FitOptions(max_queries=60))
    assert report["status"] == "fitted"


def test_a_records_history_is_every_version_that_touched_it_however_many_came_after(loaded):
    """The admin's case page listed the versions that touched a case among the newest 200 only:
    past them its history read "none recorded"."""
    store = loaded
    case = store.add_case(CaseRecord("a case with a long history after it", ("a.one",), "", None))
    created = store.versions(limit=1)[0].id
    other = next(c for c in store.cases() if c.query == "who came today")
    for n in range(205):
        other = store.update_case(other.id, other.version, replace(other, rationale=f"edit {n}"))
    assert [v.id for v in store.record_history("case", str(case.id))] == [created]
    edited = store.update_case(case.id, case.version, replace(case, rationale="edited at last"))
    history = store.record_history("case", str(case.id))
    assert [v.id for v in history] == [store.versions(limit=1)[0].id, created]   # newest first
    assert history[0].changes[0].after["rationale"] == edited.rationale
    assert len(store.record_history("case", str(other.id))) == 1 + 205   # its import, then each edit


def test_the_migration_fills_every_records_history_from_the_versions_before_it(loaded, engine):
    from catalog import db

    store = loaded
    case = next(c for c in store.cases() if c.query == "enroll a kid")
    store.update_case(case.id, case.version, replace(case, rationale="changed"))
    task = store.task("c.three")
    store.update_task(task.id, task.version, replace(task, help="Routes of the buses"))
    store.delete_case(case.id, store.case(case.id).version)
    expected = {}
    for version in reversed(store.versions(limit=100)):   # oldest first
        for change in version.changes:
            expected.setdefault((change.kind, change.key), []).insert(0, version.id)
    db.downgrade(engine, "0018")
    db.upgrade(engine)
    assert {key: [v.id for v in store.record_history(*key)] for key in expected} == expected
    assert len(expected) == len(TASKS) + len(CASES)
