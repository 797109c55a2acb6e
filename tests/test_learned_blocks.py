"""Blocking a learned (query, task) pair is a versioned catalog edit, on SQLite and PostgreSQL:
stored in `learned_blocks` (migration 0009), published as a catalog version with its audit
entry, reconstructed by `state_at`, undone by a rollback like any edit, and read by the fit's
I/O edge through `catalog.store.learned_blocks(session)`."""
from __future__ import annotations

import pytest
from sqlalchemy.orm import Session

from catalog.records import TaskRecord
from catalog.store import CatalogStore, NotFound, learned_blocks

TASKS = [TaskRecord("a.one", "Enrollment form", "Enroll a child", "enrollment"),
         TaskRecord("b.two", "Attendance", "Daily attendance", "attendance")]


@pytest.fixture
def loaded(engine):
    audit: list[tuple] = []

    def sink(session, actor, action, target, before, after):
        audit.append((actor, action, target, before, after))

    store = CatalogStore(engine, audit=sink)
    store.import_tasks(TASKS, actor="cli:test")
    store.audit_log = audit
    return store


def test_a_block_is_a_published_version_with_its_audit_entry(loaded):
    store = loaded
    revision = store.revision()
    version_id = store.block_learned("enroll kid", "b.two", actor="user:eddie", message="clicks by mistake")
    assert store.blocked_pairs() == frozenset({("enroll kid", "b.two")})
    with Session(store.engine) as session:
        assert learned_blocks(session) == frozenset({("enroll kid", "b.two")})
    assert store.revision() > revision, "serving processes notice a block like any edit"

    version = store.version(version_id)
    assert (version.kind, version.actor, version.message) == ("learned.block", "user:eddie", "clicks by mistake")
    [change] = version.changes
    assert (change.kind, change.action, change.before) == ("block", "created", None)
    assert (change.after["query"], change.after["task_id"]) == ("enroll kid", "b.two")
    assert version.summary()["block"] == 1
    actor, action, target, _before, after = store.audit_log[-1]
    assert (actor, action, after["version"]) == ("user:eddie", "catalog.learned.block", version_id)
    assert "enroll kid" in target and "b.two" in target

    assert store.block_learned("enroll kid", "b.two", actor="user:eddie") is None, "already blocked: no new version"


def test_unblock_and_rollback_restore_the_blocks_exactly(loaded):
    store = loaded
    clean = store.versions(limit=1)[0].id
    first = store.block_learned("enroll kid", "b.two", actor="user:eddie")
    store.block_learned("who came", "a.one", actor="user:eddie")
    assert store.blocked_pairs() == {("enroll kid", "b.two"), ("who came", "a.one")}

    undo = store.unblock_learned("who came", "a.one", actor="user:eddie")
    assert store.version(undo).kind == "learned.unblock"
    assert store.blocked_pairs() == {("enroll kid", "b.two")}
    with pytest.raises(NotFound):
        store.unblock_learned("who came", "a.one", actor="user:eddie")

    rolled = store.rollback(clean, actor="user:eddie")
    assert store.blocked_pairs() == frozenset(), "rolling back to before the block lifts it"
    assert {(c.kind, c.action) for c in store.version(rolled).changes} == {("block", "deleted")}
    store.rollback(first, actor="user:eddie")
    assert store.blocked_pairs() == {("enroll kid", "b.two")}, "and rolling forward blocks again"
    store.rollback(rolled - 1)
    assert store.blocked_pairs() == {("enroll kid", "b.two")}


def test_a_block_names_a_stored_task_and_a_real_query(loaded):
    store = loaded
    with pytest.raises(NotFound):
        store.block_learned("enroll kid", "no.such", actor="user:eddie")
    for bad in ("", "   ", "x" * 501):
        with pytest.raises(ValueError):
            store.block_learned(bad, "a.one", actor="user:eddie")
    assert store.blocked_pairs() == frozenset()
    assert store.versions(limit=1)[0].kind == "import.tasks", "a refused block publishes nothing"


def test_task_and_case_edits_keep_working_beside_blocks(loaded):
    """A rollback over a mix of task edits and blocks restores both."""
    from dataclasses import replace

    store = loaded
    clean = store.versions(limit=1)[0].id
    store.block_learned("enroll kid", "b.two", actor="user:eddie")
    task = store.task("a.one")
    store.update_task("a.one", task.version, replace(task, name="Enrolment"), actor="user:eddie")
    store.rollback(clean)
    assert store.task("a.one").name == "Enrollment form" and store.blocked_pairs() == frozenset()


def test_the_serving_index_drops_a_pair_blocked_after_its_fit(loaded, settings):
    """A fit that weighed a learned pair keeps serving after the pair is blocked, without it,
    and is due for a refit (which leaves the pair out: search.fitting.usable_learned)."""
    from dataclasses import replace

    from infra.metrics import Metrics
    from search.fitting import cases_digest
    from search.learned import LearnedExemplar
    from search.ranker import default_params
    from serving.service import SearchService

    store = loaded
    learned = (LearnedExemplar("enroll kid", "a.one", 0.9, 4), LearnedExemplar("who came", "b.two", 0.8, 3))
    params = replace(default_params(settings), learned=learned)
    store.save_fit(store.revision(), cases_digest(store.tasks(), store.cases()), params.as_dict(), {"status": "fitted"})
    service = SearchService(settings.with_overrides(embeddings_enabled=False), store, None, None, Metrics())
    live = service.live(wait=True)
    assert set(live.index.learned.texts) == {"enroll kid", "who came"} and not live.fit_stale

    store.block_learned("enroll kid", "a.one", actor="user:eddie")
    live = service.live(wait=True)
    assert set(live.index.learned.texts) == {"who came"}
    assert live.params.learned == (learned[1],) and live.fit_stale
    service.close()
