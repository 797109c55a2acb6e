"""The catalog store as a state machine (issue 44 item 2), on SQLite and PostgreSQL.

Hypothesis drives random sequences of writes (create, edit and delete a test case, a stale edit,
create and edit a task, import a small batch of cases or tasks, with or without `replace`,
revert one earlier version, roll back to an earlier version) against a plain model: the records
as {(kind, key): snapshot} and the log of versions, each with exactly what it touched. Every write
of the store is a publish (there are no drafts), so each rule is one publish or one refusal.
After every step:

* the store holds exactly the model's records, content and record version (an edit moves the
  record version on; a record a revert or rollback re-creates continues its counter);
* the version log is the model's, change for change; replaying it from nothing gives the
  records the store holds;
* every case id and version id is given out once, forever: never to another record, also not
  after the tables were emptied between examples (the sequences and SQLite's AUTOINCREMENT
  outlive the rows);
* each record's history (the versions whose changes name it, as the admin's case page lists
  them) is exactly the versions that touched it;
* a revert of version N equals replaying the log without N; the store refuses it exactly where
  the model says it must: a later version touched one of N's records, or the replayed catalog
  would be broken (two cases with one query, a case naming a task that does not exist);
* a rollback to version V restores the log replayed up to V (and `state_at(V)` says so first).

One engine per database for the whole run; the tables are emptied before each example.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test
from sqlalchemy import text

from catalog.records import CaseRecord, TaskRecord
from catalog.store import CatalogStore, RevertRefused, StaleEdit, StoreConflict
from catalog.versions import CASE, TASK, content, state_of

TASK_IDS = ("t.a", "t.b", "t.c", "t.d")
QUERIES = ("enroll a kid", "who came today", "lunch menu", "bus route", "medical exam due",
           "need a substitute teacher today")
NAMES = ("Enrollment", "Attendance", "Bus route")
RATIONALES = ("", "enroll = enrollment", "see the form")
CATEGORIES = (None, "synonym")

SETTINGS = settings(max_examples=25, stateful_step_count=12, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def case_content(query: str, gold, rationale: str, category: str | None) -> dict:
    return {"query": query, "gold": list(gold), "rationale": rationale, "category": category}


def task_content(name: str, active: bool) -> dict:
    return {"name": name, "help": "", "category": None, "aliases": [], "url": None, "roles": [], "active": active}


def contents(state: dict) -> dict:
    """Records without their record versions: what a revert or rollback restores."""
    return {key: content(key[0], snapshot) for key, snapshot in state.items()}


def broken(records: dict) -> list[str]:
    """Why a catalog (contents) cannot be: two cases with one query, a case naming a missing task."""
    tasks = {key for kind, key in records if kind == TASK}
    queries = [c["query"] for (kind, _), c in records.items() if kind == CASE]
    problems = [f"query {q!r} twice" for q in set(queries) if queries.count(q) > 1]
    problems += [f"case #{key} names missing task {g}" for (kind, key), c in records.items() if kind == CASE
                 for g in c["gold"] if g not in tasks]
    return problems


class StoreMachine(RuleBasedStateMachine):
    engine = None                 # set per database by the test below
    issued_case_ids: set[int]     # every case id the store gave out, over all examples of a run
    issued_version_ids: set[int]

    def __init__(self):
        super().__init__()
        with self.engine.begin() as connection:
            for table in ("catalog_versions", "test_cases", "learned_blocks", "tasks"):
                connection.execute(text(f"DELETE FROM {table}"))
        self.store = CatalogStore(self.engine)
        self.state: dict = {}      # (kind, key) -> snapshot (content and "version")
        self.log: list = []        # [(version id, {(kind, key): (before, after)})], oldest first
        self.highest: dict = {}    # (kind, key) -> the highest record version it ever had

    # -- the model -----------------------------------------------------------------------------
    def case_keys(self) -> list:
        return sorted((k for k in self.state if k[0] == CASE), key=lambda k: int(k[1]))

    def task_ids(self) -> list[str]:
        return sorted(key for kind, key in self.state if kind == TASK)

    def holder(self, query: str):
        return next((k for k in self.case_keys() if self.state[k]["query"] == query), None)

    def replay(self, skip: int | None = None, upto: int | None = None) -> dict:
        """The contents the log gives, replayed from nothing (without version `skip`, up to `upto`)."""
        records: dict = {}
        for version_id, changes in self.log:
            if upto is not None and version_id > upto:
                break
            if version_id == skip:
                continue
            for key, (_before, after) in changes.items():
                if after is None:
                    records.pop(key, None)
                else:
                    records[key] = content(key[0], after)
        return records

    def newest(self) -> int | None:
        return self.log[-1][0] if self.log else None

    def publishes(self, call, targets: dict, new_cases: list[dict] = ()):
        """Run the store write `call`; it must publish exactly one version whose changes are the
        model's: each key of `targets` brought to its content (None: deleted) where that differs
        from now, and each of `new_cases` created under a case id never given out before; or
        nothing at all where nothing differs."""
        expected = {}
        for key, target in targets.items():
            before = self.state.get(key)
            if content(key[0], before) != target:
                after = None if target is None else {**target, "version": self.highest.get(key, 0) + 1}
                expected[key] = (before, after)
        result = call()
        published = [v for v in self.store.versions(limit=5) if self.newest() is None or v.id > self.newest()]
        if not expected and not new_cases:
            event("no change, no version")
            assert published == [], "a write that changes nothing publishes no version"
            return result
        [version] = published
        assert version.id not in self.issued_version_ids, f"version id {version.id} given out twice"
        assert all(version.id > other for other in self.issued_version_ids)
        self.issued_version_ids.add(version.id)
        changes = {(c.kind, c.key): (c.before, c.after) for c in version.changes}
        assert len(changes) == len(version.changes), "a version names a record once"
        wanted = {c["query"]: c for c in new_cases}
        for key, (before, after) in changes.items():
            if key[0] == CASE and key not in targets and before is None and after["query"] in wanted:
                case_id = int(key[1])
                assert case_id not in self.issued_case_ids, f"case id {case_id} given to a second record"
                assert all(case_id > other for other in self.issued_case_ids)
                self.issued_case_ids.add(case_id)
                expected[key] = (None, {**wanted.pop(after["query"]), "version": 1})
        assert wanted == {}, f"cases not created: {sorted(wanted)}"
        assert changes == expected
        for key, (_before, after) in changes.items():
            if after is None:
                self.state.pop(key)
            else:
                self.state[key] = after
                self.highest[key] = after["version"]
        self.log.append((version.id, changes))
        return result

    def refused(self, call, error) -> Exception:
        """`call` raises `error` and writes nothing (the invariants check the records)."""
        newest = self.newest()
        with pytest.raises(error) as raised:
            call()
        event(f"refused: {error.__name__}")
        assert [v.id for v in self.store.versions(limit=1)] == ([newest] if newest else [])
        return raised.value

    # -- test cases ----------------------------------------------------------------------------
    def draw_gold(self, data) -> list[str]:
        tasks = self.task_ids()
        return data.draw(st.lists(st.sampled_from(tasks), unique=True, max_size=2)) if tasks else []

    @rule(data=st.data(), query=st.sampled_from(QUERIES), rationale=st.sampled_from(RATIONALES),
          category=st.sampled_from(CATEGORIES))
    def add_case(self, data, query, rationale, category):
        wanted = case_content(query, self.draw_gold(data), rationale, category)
        record = CaseRecord(query, tuple(wanted["gold"]), rationale, category)
        if self.holder(query) is not None:
            self.refused(lambda: self.store.add_case(record), StoreConflict)
        else:
            created = self.publishes(lambda: self.store.add_case(record), {}, [wanted])
            assert self.state[(CASE, str(created.id))]["query"] == query

    @precondition(lambda self: self.case_keys())
    @rule(data=st.data(), query=st.sampled_from(QUERIES), rationale=st.sampled_from(RATIONALES),
          category=st.sampled_from(CATEGORIES))
    def edit_case(self, data, query, rationale, category):
        key = data.draw(st.sampled_from(self.case_keys()))
        wanted = case_content(query, self.draw_gold(data), rationale, category)
        record = CaseRecord(query, tuple(wanted["gold"]), rationale, category)
        edit = lambda: self.store.update_case(int(key[1]), self.state[key]["version"], record)  # noqa: E731
        if self.holder(query) not in (None, key):
            self.refused(edit, StoreConflict)
        else:
            self.publishes(edit, {key: wanted})

    @precondition(lambda self: self.case_keys())
    @rule(data=st.data(), off_by=st.sampled_from((-1, 1)), delete=st.booleans())
    def stale_case_edit(self, data, off_by, delete):
        key = data.draw(st.sampled_from(self.case_keys()))
        stale = self.state[key]["version"] + off_by
        now = self.state[key]
        if delete:
            call = lambda: self.store.delete_case(int(key[1]), stale)  # noqa: E731
        else:
            call = lambda: self.store.update_case(int(key[1]), stale, CaseRecord("a stale edit", (), "", None))  # noqa: E731
        error = self.refused(call, StaleEdit)
        assert error.current is not None and content(CASE, {**now}) == content(CASE, {
            "query": error.current.query, "gold": list(error.current.gold), "rationale": error.current.rationale,
            "category": error.current.category})

    @precondition(lambda self: self.case_keys())
    @rule(data=st.data())
    def delete_case(self, data):
        key = data.draw(st.sampled_from(self.case_keys()))
        self.publishes(lambda: self.store.delete_case(int(key[1]), self.state[key]["version"]), {key: None})

    @rule(data=st.data(), replace=st.sampled_from((False, False, True)))
    def import_cases(self, data, replace):
        batch = data.draw(st.lists(st.tuples(st.sampled_from(QUERIES), st.sampled_from(RATIONALES),
                                             st.sampled_from(CATEGORIES)),
                                   min_size=1, max_size=3, unique_by=lambda row: row[0]))
        rows = [case_content(q, self.draw_gold(data), r, c) for q, r, c in batch]
        incoming = {row["query"] for row in rows}
        targets = {key: None for key in self.case_keys() if replace and self.state[key]["query"] not in incoming}
        new_cases = []
        for row in rows:
            key = self.holder(row["query"])
            if key is None:
                new_cases.append(row)
            else:
                targets[key] = row
        records = [CaseRecord(r["query"], tuple(r["gold"]), r["rationale"], r["category"]) for r in rows]
        self.publishes(lambda: self.store.import_cases(records, replace=replace), targets, new_cases)

    # -- tasks ----------------------------------------------------------------------------------
    @rule(task_id=st.sampled_from(TASK_IDS), name=st.sampled_from(NAMES))
    def add_task(self, task_id, name):
        call = lambda: self.store.add_task(TaskRecord(task_id, name))  # noqa: E731
        if (TASK, task_id) in self.state:
            self.refused(call, StoreConflict)
        else:
            self.publishes(call, {(TASK, task_id): task_content(name, True)})

    @precondition(lambda self: self.task_ids())
    @rule(data=st.data(), name=st.sampled_from(NAMES), active=st.booleans())
    def edit_task(self, data, name, active):
        task_id = data.draw(st.sampled_from(self.task_ids()))
        key = (TASK, task_id)
        self.publishes(lambda: self.store.update_task(task_id, self.state[key]["version"],
                                                      TaskRecord(task_id, name, active=active)),
                       {key: task_content(name, active)})

    @rule(batch=st.lists(st.tuples(st.sampled_from(TASK_IDS), st.sampled_from(NAMES), st.booleans()),
                         min_size=1, max_size=3, unique_by=lambda row: row[0]),
          replace=st.sampled_from((False, False, True)))
    def import_tasks(self, batch, replace):
        records = [TaskRecord(task_id, name, active=active) for task_id, name, active in batch]
        call = lambda: self.store.import_tasks(records, replace=replace)  # noqa: E731
        incoming = {task_id for task_id, _, _ in batch}
        removed = {t for t in self.task_ids() if t not in incoming} if replace else set()
        named = {g for key in self.case_keys() for g in self.state[key]["gold"]}
        if removed & named:
            self.refused(call, StoreConflict)
            return
        targets = {(TASK, t): None for t in removed}
        targets.update({(TASK, task_id): task_content(name, active) for task_id, name, active in batch})
        self.publishes(call, targets)

    # -- versions -------------------------------------------------------------------------------
    @precondition(lambda self: self.log)
    @rule(data=st.data())
    def revert(self, data):
        version_id, changes = data.draw(st.sampled_from(self.log))
        touched_later = {key for later, their in self.log if later > version_id for key in their}
        expected = self.replay(skip=version_id)
        call = lambda: self.store.revert(version_id)  # noqa: E731
        if touched_later & set(changes) or broken(expected):
            event("revert refused: " + ("touched later" if touched_later & set(changes) else "broken catalog"))
            self.refused(call, RevertRefused)
            return
        event("revert published")
        self.publishes(call, {key: expected.get(key) for key in changes})
        assert contents(self.state) == expected, "a revert equals the log replayed without that version"

    @precondition(lambda self: self.log)
    @rule(data=st.data())
    def rollback(self, data):
        version_id = data.draw(st.sampled_from([v for v, _ in self.log]))
        target = self.replay(upto=version_id)
        tasks, cases = self.store.state_at(version_id)
        assert contents(state_of(tasks, cases)) == target, "state_at(V) is the log replayed up to V"
        self.publishes(lambda: self.store.rollback(version_id),
                       {key: target.get(key) for key in set(self.state) | set(target)})
        assert contents(self.state) == target

    # -- invariants -----------------------------------------------------------------------------
    @invariant()
    def the_store_holds_the_model(self):
        held = state_of(self.store.tasks(include_inactive=True), self.store.cases())
        assert held == self.state

    @invariant()
    def the_log_is_the_model_and_replays_to_the_records(self):
        versions = list(reversed(self.store.versions(limit=1000)))
        assert [(v.id, {(c.kind, c.key): (c.before, c.after) for c in v.changes}) for v in versions] == self.log
        assert self.replay() == contents(self.state)
        assert broken(contents(self.state)) == []

    @invariant()
    def each_record_history_is_the_versions_that_touched_it(self):
        """As the admin's case page lists it (CatalogStore.record_history, newest first)."""
        for kind, key in self.highest:   # every record the model ever saw, deleted ones included
            history = [v.id for v in reversed(self.store.record_history(kind, key))]
            assert history == [v for v, changes in self.log if (kind, key) in changes], (kind, key)

    @invariant()
    def ids_are_never_given_to_another_record(self):
        for kind, key in self.case_keys():
            assert int(key) in self.issued_case_ids


def test_the_store_behaves_as_its_model(engine):
    machine = type(f"StoreMachine_{engine.dialect.name}", (StoreMachine,),
                   {"engine": engine, "issued_case_ids": set(), "issued_version_ids": set()})
    run_state_machine_as_test(machine, settings=SETTINGS)


# -- the bugs the machine found, as plain regressions ---------------------------------------------
def test_a_task_id_given_again_continues_its_record_version(store):
    """Reverting a task's creation deleted it; adding (or importing) the same id again restarted
    its record version at 1, so an editor still holding the old task's page (version 1) overwrote
    the new task without a conflict."""
    old = store.add_task(TaskRecord("t.a", "Enrollment"))
    store.revert(store.versions(limit=1)[0].id)
    again = store.add_task(TaskRecord("t.a", "Attendance"))
    assert again.version == old.version + 1
    with pytest.raises(StaleEdit):
        store.update_task("t.a", old.version, TaskRecord("t.a", "the old page's edit"))
    store.revert(store.versions(limit=1)[0].id)
    store.import_tasks([TaskRecord("t.a", "Bus route")])
    assert store.task("t.a").version == again.version + 1


def test_a_rollback_swapping_two_queries_moves_each_record_version_by_one(store):
    """The placeholder a swapped query passes through was a versioned ORM update of its own: the
    rollback moved both records two versions on, and no version of the history held the one between."""
    a = store.add_case(CaseRecord("q one", (), "", None))
    b = store.add_case(CaseRecord("q two", (), "", None))
    start = store.versions(limit=1)[0].id
    a = store.update_case(a.id, a.version, CaseRecord("q three", (), "", None))
    b = store.update_case(b.id, b.version, CaseRecord("q one", (), "", None))
    a = store.update_case(a.id, a.version, CaseRecord("q two", (), "", None))
    store.rollback(start)
    assert [(c.query, c.version) for c in store.cases()] == [("q one", a.version + 1), ("q two", b.version + 1)]
    assert {c.key: (c.before["version"], c.after["version"]) for c in store.versions(limit=1)[0].changes} == {
        str(a.id): (a.version, a.version + 1), str(b.id): (b.version, b.version + 1)}
