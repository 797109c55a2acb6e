"""The catalog store on SQLite and PostgreSQL: migrations, upserts, revisions, conflicts. Speed is
measured by ops/bench_store_import.py, never here."""
import pytest
from sqlalchemy import inspect

from catalog import db
from catalog.records import CaseRecord, TaskRecord
from catalog.store import StoreConflict

TASKS = [
    TaskRecord(id="health.asq3", name="ASQ-3 Screening", help="Ages and Stages developmental screening",
               category="health", aliases=("Developmental screening",), url="/health/asq3"),
    TaskRecord(id="fiscal.inkind", name="In-Kind Tracking", help="Non-federal share", category="fiscal",
               roles=("fiscal", "director")),
]


def test_migrations_create_the_schema_and_downgrade_cleanly(engine):
    tables = set(inspect(engine).get_table_names())
    assert {"tasks", "test_cases", "store_revision", "alembic_version"} <= tables
    db.downgrade(engine, "base")
    assert not {"tasks", "test_cases"} & set(inspect(engine).get_table_names())
    db.upgrade(engine)
    assert "tasks" in inspect(engine).get_table_names()


def test_an_upgrade_at_head_runs_no_migration_and_one_behind_runs_the_missing_ones(engine, monkeypatch):
    """A restart's upgrade of a database at the newest migration is one query, not Alembic
    loading every migration script (~20 ms each time); a database behind is still migrated."""
    from alembic import command

    ran = []
    real_upgrade = command.upgrade
    monkeypatch.setattr(command, "upgrade", lambda config, revision: ran.append(revision) or real_upgrade(config, revision))
    db.upgrade(engine)
    assert ran == [] and db.at_newest_migration(engine)
    db.downgrade(engine, "0002")
    db.upgrade(engine)
    assert ran == ["head"] and db.at_newest_migration(engine)


def test_an_import_reads_the_store_in_statements_that_do_not_grow_with_its_size(store, engine):
    """A SELECT per task asked whether it existed (200 for the demo's tasks on an empty store):
    the rows an import writes are read in one statement per LOAD_CHUNK keys."""
    from sqlalchemy import event

    selects = []
    listener = lambda conn, cursor, statement, *rest: selects.append(statement) if statement.lstrip().upper().startswith("SELECT") else None  # noqa: E731
    event.listen(engine, "before_cursor_execute", listener)
    try:
        counts = []
        for size in (10, 600):   # 600: past one chunk (catalog.store.LOAD_CHUNK, 500)
            selects.clear()
            tasks = [TaskRecord(id=f"t{size}.{i}", name=f"Task {i}", category="c") for i in range(size)]
            assert store.import_tasks(tasks)["created"] == size
            counts.append(len(selects))
            selects.clear()
            store.import_tasks([TaskRecord(**{**t.__dict__, "help": "changed"}) for t in tasks])   # all updated
            counts.append(len(selects))
    finally:
        event.remove(engine, "before_cursor_execute", listener)
    # one more SELECT ... IN per chunk of keys, in each read: the rows, and the history of re-created ids
    assert max(counts) <= min(counts) + 4, counts
    assert {t.id for t in store.tasks()} >= {"t600.599", "t10.9"}


def test_import_round_trips_every_field_and_bumps_the_revision(store):
    assert store.revision() == 0
    report = store.import_tasks(TASKS)
    assert report == {"created": 2, "updated": 0, "removed": 0, "unchanged": 0}
    assert store.tasks() == sorted(TASKS, key=lambda t: t.id)
    assert store.revision() == 1
    assert store.roles() == {"fiscal", "director"}


def test_reimport_updates_only_changed_tasks(store):
    store.import_tasks(TASKS)
    changed = [TASKS[0], TaskRecord(**{**TASKS[1].__dict__, "help": "Non-federal share (20% match)"})]
    assert store.import_tasks(changed) == {"created": 0, "updated": 1, "removed": 0, "unchanged": 1}
    assert {t.id: t.help for t in store.tasks()}["fiscal.inkind"] == "Non-federal share (20% match)"


def test_replace_refuses_to_drop_a_task_that_a_case_names(store):
    store.import_tasks(TASKS)
    store.import_cases([CaseRecord(query="match funds", gold=("fiscal.inkind",), rationale="in-kind")])
    with pytest.raises(StoreConflict, match="fiscal.inkind"):
        store.import_tasks([TASKS[0]], replace=True)
    assert len(store.tasks()) == 2  # nothing was written


def test_inactive_tasks_are_hidden_from_search_reads(store):
    store.import_tasks([TASKS[0], TaskRecord(**{**TASKS[1].__dict__, "active": False})])
    assert [t.id for t in store.tasks()] == ["health.asq3"]
    assert len(store.tasks(include_inactive=True)) == 2


def test_cases_upsert_by_query_and_out_of_scope_cases_keep_empty_gold(store):
    store.import_tasks(TASKS)
    cases = [CaseRecord(query="ASQ", gold=("health.asq3",), rationale="Ages and Stages", category="abbreviation"),
             CaseRecord(query="book a flight", gold=(), rationale="travel is not a task", category="natural_language")]
    assert store.import_cases(cases)["created"] == 2
    assert store.import_cases(cases) == {"created": 0, "updated": 0, "unchanged": 2}
    stored = {c.query: c for c in store.cases()}
    assert stored["book a flight"].gold == ()
    assert stored["ASQ"].category == "abbreviation"


def test_stale_edit_is_rejected_not_silently_applied(store):
    store.import_tasks(TASKS)
    case = store.add_case(CaseRecord(query="ASQ", gold=("health.asq3",), rationale="first"))
    first = store.update_case(case.id, case.version, CaseRecord(query="ASQ", gold=("health.asq3",), rationale="second"))
    with pytest.raises(StoreConflict, match="version"):
        store.update_case(case.id, case.version, CaseRecord(query="ASQ", gold=("health.asq3",), rationale="third"))
    assert store.case(case.id).rationale == "second"
    assert first.version == case.version + 1
    with pytest.raises(StoreConflict):
        store.delete_case(case.id, case.version)
    store.delete_case(case.id, first.version)
    assert store.cases() == []


def test_two_concurrent_first_writes_on_a_fresh_database_both_succeed(engine):
    """Migration 0002 seeds the revision row, so the first writes only ever UPDATE it: two of
    them at once neither collide on inserting the row nor lose a bump."""
    import threading

    from catalog.store import CatalogStore

    stores = [CatalogStore(engine), CatalogStore(engine)]
    assert stores[0].revision() == 0
    barrier, errors = threading.Barrier(2), []

    def first_write(store, task):
        try:
            barrier.wait(10)
            store.import_tasks([task])
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=first_write, args=(s, t)) for s, t in zip(stores, TASKS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert stores[0].revision() == 2
    assert {t.id for t in stores[0].tasks()} == {t.id for t in TASKS}


def test_a_database_without_the_revision_row_is_refused_not_patched(engine):
    """The revision row belongs to the migrations; a write never inserts it (two first writes
    inserting it at once collided on its primary key)."""
    from sqlalchemy import delete

    from catalog.models import StoreRevision
    from catalog.store import CatalogStore

    with engine.begin() as conn:
        conn.execute(delete(StoreRevision))
    store = CatalogStore(engine)
    with pytest.raises(Exception, match="db upgrade") as refused:
        store.import_tasks(TASKS)
    assert type(refused.value).__name__ == "StoreNotMigrated"
    assert store.tasks() == [] and store.revision() == 0  # nothing was written


def test_bump_revision_moves_the_revision_without_an_edit(store):
    store.import_tasks(TASKS)
    assert store.bump_revision() == 2 and store.revision() == 2
    assert len(store.tasks()) == 2


def test_ranker_fits_are_kept_as_history_and_each_moves_the_revision(store):
    """A saved fit must reach every serving process: it moves the revision, and the newest wins."""
    before = store.revision()
    assert store.latest_fit() is None
    first = store.save_fit(before, "digest-a", {"weights": {"full": {"lexical": 1.0}}}, {"status": "fitted"})
    second = store.save_fit(before + 1, "digest-b", {"weights": {"full": {"lexical": 2.0}}}, {"cv": {"n": 3}})
    assert store.revision() == before + 2
    latest = store.latest_fit()
    assert latest.id == second > first and latest.cases_digest == "digest-b"
    assert latest.params["weights"]["full"]["lexical"] == 2.0 and latest.report == {"cv": {"n": 3}}
    assert [fit.id for fit in store.fits()] == [second, first]


def test_a_lease_is_held_by_one_holder_until_released_or_expired(store):
    """Workers and hosts sharing the database fit the ranker one at a time."""
    assert store.acquire_lease("ranker-fit", 60)
    assert not store.acquire_lease("ranker-fit", 60)       # another worker: refused
    store.release_lease("ranker-fit")
    assert store.acquire_lease("ranker-fit", -1)           # taken, but already expired...
    assert store.acquire_lease("ranker-fit", 60)           # ...so the next taker gets it
    assert store.revision() >= 0 and store.acquire_lease("other", 60)
