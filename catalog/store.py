"""CatalogStore: the only code that reads or writes tasks and test cases in the database.

Writes run in one transaction each and bump the store revision in that same transaction, so
an import is all-or-nothing and a search index can ask "has anything changed?" with one read.
Every write to tasks or test cases is a published change: it records a catalog version (its
per-record changeset, catalog.versions) and an audit entry in that same transaction, and takes
the actor (`user:NAME`, `cli:NAME`) and an optional message. Edits name the record version they
were based on; a stale one raises StaleEdit (carrying the record as it is now), never overwrites.
Blocks of learned evidence (a (normalised query, task) pair that must stop counting) are
published the same way (block_learned, unblock_learned) and rolled back with everything else.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Callable

from sqlalchemy import Engine, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.orm.attributes import set_committed_value
from sqlalchemy.orm.exc import StaleDataError

from catalog.models import CatalogVersion, LearnedBlock, RankerFit, RecordChange, StoreRevision, Task, TestCase
from catalog.records import CaseRecord, TaskRecord
from catalog.versions import (BLOCK, CASE, TASK, Change, RevertPlan, RollbackPlan, VersionRecord, block_key,
                              block_pair, block_snapshot, case_from, case_snapshot, changes_between, content, diff,
                              last_versions, records_of, revert_plan, state_at, state_of, task_from, task_snapshot)
from lexicon.text import printable, query_problem
from infra.words import counted

REVISION_ROW = "catalog"
MAX_BLOCK_QUERY = 500   # the learned_blocks.query column (and a test case's query)
SYSTEM_ACTOR = "system"
# (session, actor, action, target, before, after): admin.audit.record, injected by the app so that
# the catalog does not depend on the admin package; it writes in the caller's transaction.
AuditSink = Callable[[Session, str, str, str, dict | None, dict | None], None]


@dataclass(frozen=True)
class FitRecord:
    id: int
    store_revision: int
    cases_digest: str
    created_at: datetime
    params: dict
    report: dict


class StoreConflict(Exception):
    """An edit was based on a stale version of a record, or would break a reference."""


class StaleEdit(StoreConflict):
    """The edit was based on an older version of the record; `current` is the record as it is
    now (None if it was deleted meanwhile), for a conflict page or a 409 answer."""

    def __init__(self, message: str, current: TaskRecord | CaseRecord | None):
        super().__init__(message)
        self.current = current


class StaleRollback(StoreConflict):
    """A rollback confirmed on a plan computed before the newest version was published."""


class StaleRevert(StoreConflict):
    """A revert confirmed on a plan computed before the newest version was published."""


class RevertRefused(StoreConflict):
    """A version cannot be reverted on its own: a later version touched one of its records (or
    the revert would clash with one); the message names the record and that later version."""

    def __init__(self, plan: RevertPlan):
        super().__init__(plan.refusal())
        self.plan = plan


class NotFound(KeyError):
    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "not found"


class StoreNotMigrated(RuntimeError):
    """The database lacks what the migrations create (here: the seeded store revision row)."""


def _task_record(row: Task) -> TaskRecord:
    return TaskRecord(id=row.id, name=row.name, help=row.help or "", category=row.category,
                      aliases=tuple(row.aliases or ()), url=row.url, roles=tuple(row.roles or ()),
                      active=row.active, version=row.version)


def _fit_record(row: RankerFit) -> FitRecord:
    return FitRecord(row.id, row.store_revision, row.cases_digest, row.created_at, row.params, row.report)


def _case_record(row: TestCase) -> CaseRecord:
    return CaseRecord(id=row.id, query=row.query, gold=tuple(row.gold or ()), rationale=row.rationale or "",
                      category=row.category, version=row.version)


def learned_blocks(session: Session) -> frozenset[tuple[str, str]]:
    """Every blocked (query, task_id) pair of learned evidence, read in the caller's session:
    what the I/O edge that loads the fit's inputs passes to the fit as `blocked`."""
    return frozenset((query, task_id) for query, task_id in
                     session.execute(select(LearnedBlock.query, LearnedBlock.task_id)))


def _block_snapshots(session: Session) -> list[dict]:
    return [block_snapshot(row.query, row.task_id, row.reason) for row in session.scalars(select(LearnedBlock))]


class CatalogStore:
    def __init__(self, engine: Engine, audit: AuditSink | None = None):
        self.engine = engine
        self.audit = audit
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    # -- reads ---------------------------------------------------------------------------
    def revision(self) -> int:
        with self._sessions() as session:
            value = session.scalar(select(StoreRevision.revision).where(StoreRevision.name == REVISION_ROW))
            return value or 0

    def tasks(self, include_inactive: bool = False) -> list[TaskRecord]:
        with self._sessions() as session:
            query = select(Task).order_by(Task.id)
            if not include_inactive:
                query = query.where(Task.active.is_(True))
            return [_task_record(row) for row in session.scalars(query)]

    def task(self, task_id: str) -> TaskRecord:
        """One task, active or not (NotFound if there is none)."""
        with self._sessions() as session:
            row = session.get(Task, task_id)
            if row is None:
                raise NotFound(f"task {task_id} not found")
            return _task_record(row)

    def cases(self) -> list[CaseRecord]:
        with self._sessions() as session:
            return [_case_record(row) for row in session.scalars(select(TestCase).order_by(TestCase.id))]

    def case(self, case_id: int) -> CaseRecord:
        with self._sessions() as session:
            row = session.get(TestCase, case_id)
            if row is None:
                raise NotFound(f"test case {case_id} not found")
            return _case_record(row)

    def latest_fit(self) -> FitRecord | None:
        """The newest per-catalog ranker fit (search.fitting), or None."""
        with self._sessions() as session:
            row = session.scalars(select(RankerFit).order_by(RankerFit.id.desc()).limit(1)).first()
            return None if row is None else _fit_record(row)

    def fit_for_digest(self, digest: str) -> FitRecord | None:
        """The newest fit made on exactly this data (search.fitting.cases_digest), or None: after
        a rollback the catalog ranks again with the fit it had then, not a newer one."""
        with self._sessions() as session:
            row = session.scalars(select(RankerFit).where(RankerFit.cases_digest == digest)
                                  .order_by(RankerFit.id.desc()).limit(1)).first()
            return None if row is None else _fit_record(row)

    def cases_naming_retired(self) -> dict[int, tuple[str, ...]]:
        """{case id: the retired task ids its gold names}: such cases are flagged in the admin,
        never silently orphaned (the search index and the fit skip the retired gold)."""
        retired = {t.id for t in self.tasks(include_inactive=True) if not t.active}
        return {c.id: tuple(g for g in c.gold if g in retired) for c in self.cases() if retired & set(c.gold)}

    def fits(self, limit: int = 20) -> list[FitRecord]:
        with self._sessions() as session:
            rows = session.scalars(select(RankerFit).order_by(RankerFit.id.desc()).limit(limit))
            return [_fit_record(row) for row in rows]

    def save_fit(self, fitted_on_revision: int, digest: str, params: dict, report: dict) -> int:
        """Store a fit and bump the revision, so every serving process picks it up."""
        with self._sessions.begin() as session:
            row = RankerFit(store_revision=fitted_on_revision, cases_digest=digest, params=params, report=report)
            session.add(row)
            session.flush()
            self._bump(session)
            return row.id

    def blocked_pairs(self) -> frozenset[tuple[str, str]]:
        """Every blocked (query, task_id) pair of learned evidence (learned_blocks)."""
        with self._sessions() as session:
            return learned_blocks(session)

    def roles(self) -> set[str]:
        return {role for task in self.tasks() for role in task.roles}

    # -- writes --------------------------------------------------------------------------
    def acquire_lease(self, name: str, seconds: float) -> bool:
        """Take a named lease shared by every process on this database, or return False while
        another holder's lease runs (e.g. one ranker fit at a time across workers and hosts).
        The lease is a row whose `revision` holds its expiry (unix seconds); taking it is one
        conditional UPDATE, atomic in SQLite and PostgreSQL alike. An expired lease is free."""
        now = int(time.time())
        key = f"lease:{name}"[:32]
        try:
            with self._sessions.begin() as session:
                session.add(StoreRevision(name=key, revision=0))
        except IntegrityError:
            pass   # the row exists already
        with self._sessions.begin() as session:
            taken = session.execute(update(StoreRevision)
                                    .where(StoreRevision.name == key, StoreRevision.revision <= now)
                                    .values(revision=now + int(seconds)))
            return taken.rowcount == 1

    def release_lease(self, name: str) -> None:
        with self._sessions.begin() as session:
            session.execute(update(StoreRevision).where(StoreRevision.name == f"lease:{name}"[:32]).values(revision=0))

    def bump_revision(self) -> int:
        """Move the revision on without an edit here, for an input of the search index that
        lives outside the store (the catalog enrichment `corpus enrich-catalog` caches): every
        serving process then rebuilds its index, as after a catalog edit. Returns the revision."""
        with self._sessions.begin() as session:
            self._bump(session)
        return self.revision()

    def _bump(self, session: Session) -> None:
        """Move the revision on, in the caller's transaction. The row is seeded by migration
        0002 and only ever updated here: inserting it on the first write let two concurrent
        first writes both insert it, and one failed on the primary key. An UPDATE of an
        existing row is serialised by the database's row (or file) lock, so no bump is lost."""
        updated = session.execute(update(StoreRevision).where(StoreRevision.name == REVISION_ROW)
                                  .values(revision=StoreRevision.revision + 1))
        if updated.rowcount != 1:
            raise StoreNotMigrated(
                f"the store revision row {REVISION_ROW!r} is missing: migrate the database with "
                f"`python app.py db upgrade` (migration 0002 seeds it); nothing was written")


    # -- published changes: every one a catalog version (catalog.versions) --------------------
    def _begin_publish(self, session: Session) -> None:
        """Start a publishing transaction by moving the revision on: that UPDATE takes the
        revision row's lock (PostgreSQL) or the database's write lock (SQLite) until commit, so
        publishes are serialised: every check below reads committed, current rows, and version
        ids follow commit order (which reconstructing an earlier state relies on)."""
        self._bump(session)

    def _write(self, session: Session, targets: list[tuple[str, str | None, dict | None]],
               recreate_versions: dict | None = None) -> list[Change]:
        """Bring records to `targets` (kind, key or None for a new case, content or None to
        delete) and return the changes actually made. Rows are deleted first, and test cases
        whose query changes pass through a placeholder, so that a set of changes that swaps two
        queries (a rollback can) never trips the unique index halfway."""
        recreate_versions = recreate_versions or {}
        rows = _load_rows(session, [(kind, key) for kind, key, _ in targets if key is not None])
        befores = {key: None if row is None else _snapshot(key[0], row) for key, row in rows.items()}
        wanted = {(kind, key): target for kind, key, target in targets if key is not None}
        for key, row in rows.items():
            if row is not None and wanted[key] is None:
                session.delete(row)
        session.flush()
        # A case may take the query another case is leaving (a rollback can swap two): the one
        # leaving goes through a placeholder first, so the unique index never sees both at once.
        # A plain UPDATE, not the ORM's versioned one: the placeholder is no edit of its own, and
        # bumping the record version for it made the change skip a record version (3 -> 5).
        claimed = {target["query"]: key for key, target in wanted.items() if key[0] == CASE and target}
        for key, row in rows.items():
            if key[0] == CASE and row is not None and wanted[key] and claimed.get(row.query, key) != key:
                # never a real query: those are stripped
                session.execute(update(TestCase).where(TestCase.id == row.id).values(query=f" renaming #{key[1]} "))
        session.flush()
        created = []
        for kind, key, target in targets:
            if target is None:
                continue
            row = rows.get((kind, key))
            if row is None:
                row = _new_row(kind, key)
                session.add(row)
                created.append((kind, key, row))
            _assign(kind, row, target)
        session.flush()
        # A task id people give again (add or import after a revert or rollback deleted it)
        # continues the counter its history reached, as a re-created record does: restarting at 1
        # let an editor still holding the deleted task's page overwrite the new one unwarned.
        again = [(kind, key) for kind, key, _ in created if kind == TASK and (kind, key) not in recreate_versions]
        if again:
            reached = last_versions(_version_record(r) for r in _versions_touching(session, TASK, [k for _, k in again]))
            recreate_versions = {**{k: reached[k] + 1 for k in again if k in reached}, **recreate_versions}
        for kind, key, row in created:
            if (kind, key) in recreate_versions:  # the ORM inserts version 1 whatever it is given
                counter = recreate_versions[(kind, key)]
                session.execute(update(type(row)).where(type(row).id == row.id).values(version=counter))
                set_committed_value(row, "version", counter)
        changes = []
        for kind, key, target in targets:
            row = rows.get((kind, key))
            if key is None or row is None:
                continue
            after = None if target is None else _snapshot(kind, row)
            changes.append(Change(kind, key, befores[(kind, key)], after))
        for kind, key, row in created:
            changes.append(Change(kind, key if kind == BLOCK else str(row.id), befores.get((kind, key)),
                                  _snapshot(kind, row)))
        return [c for c in changes if content(c.kind, c.before) != content(c.kind, c.after)]

    def _publish(self, session: Session, kind: str, changes: list[Change], actor: str, message: str,
                 rollback_of: int | None = None) -> int | None:
        """Record `changes` as a new catalog version, with its audit entry, in the caller's
        transaction; nothing when nothing changed. Returns the version id."""
        if not changes:
            return None
        revision = session.scalar(select(StoreRevision.revision).where(StoreRevision.name == REVISION_ROW))
        row = CatalogVersion(actor=actor[:128], kind=kind[:32], message=message[:500], store_revision=revision,
                             rollback_of=rollback_of, changes=[c.as_dict() for c in changes])
        session.add(row)
        session.flush()
        session.execute(insert(RecordChange), [{"version_id": row.id, "kind": kind, "key": key}   # one executemany
                                               for kind, key in dict.fromkeys((c.kind, c.key) for c in changes)])
        if self.audit is not None:
            target = f"{changes[0].kind}:{changes[0].key}" if len(changes) == 1 else "catalog"
            self.audit(session, actor, f"catalog.{kind}", target,
                       {"records": {f"{c.kind}:{c.key}": c.before for c in changes}},
                       {"version": row.id, "message": message,
                        "records": {f"{c.kind}:{c.key}": c.after for c in changes}})
        return row.id

    def import_tasks(self, tasks: list[TaskRecord], replace: bool = False, actor: str = SYSTEM_ACTOR,
                     message: str = "") -> dict:
        """Upsert `tasks` by id, as one version. With `replace`, tasks absent from the list are
        deleted, unless a test case still names one (then nothing is written and StoreConflict
        says which)."""
        incoming = {t.id: t for t in tasks}
        with self._sessions.begin() as session:
            self._begin_publish(session)
            existing = {row.id: _task_record(row) for row in session.scalars(select(Task))}
            removed = set(existing) - set(incoming) if replace else set()
            if removed:
                referencing = [c for c in session.scalars(select(TestCase)) if removed & set(c.gold)]
                if referencing:
                    names = ", ".join(sorted(removed & {g for c in referencing for g in c.gold}))
                    raise StoreConflict(f"cannot remove tasks still named by test cases: {names}")
            targets = [(TASK, task_id, None) for task_id in sorted(removed)]
            targets += [(TASK, t.id, content(TASK, task_snapshot(t))) for t in tasks
                        if t.id not in existing or existing[t.id] != t]
            created = sum(t.id not in existing for t in tasks)
            updated = len(targets) - len(removed) - created
            self._publish(session, "import.tasks", self._write(session, targets), actor,
                          message or f"import of {counted(len(tasks), 'task')}" + (" (replace)" if replace else ""))
        return {"created": created, "updated": updated, "removed": len(removed),
                "unchanged": len(tasks) - created - updated}

    def import_cases(self, cases: list[CaseRecord], replace: bool = False, actor: str = SYSTEM_ACTOR,
                     message: str = "") -> dict:
        """Upsert test cases keyed by their query text, as one version; with `replace`, drop all others."""
        with self._sessions.begin() as session:
            self._begin_publish(session)
            existing = {row.query: _case_record(row) for row in session.scalars(select(TestCase))}
            incoming = {c.query for c in cases}
            targets = [(CASE, str(c.id), None) for q, c in existing.items() if replace and q not in incoming]
            created = updated = 0
            for case in cases:
                now = existing.get(case.query)
                wanted = content(CASE, case_snapshot(case))
                if now is None:
                    targets.append((CASE, None, wanted))
                    created += 1
                elif content(CASE, case_snapshot(now)) != wanted:
                    targets.append((CASE, str(now.id), wanted))
                    updated += 1
            self._publish(session, "import.cases", self._write(session, targets), actor,
                          message or f"import of {counted(len(cases), 'test case')}" + (" (replace)" if replace else ""))
        return {"created": created, "updated": updated, "unchanged": len(cases) - created - updated}

    def add_case(self, case: CaseRecord, actor: str = SYSTEM_ACTOR, message: str = "") -> CaseRecord:
        with self._sessions.begin() as session:
            self._begin_publish(session)
            self._check_query_free(session, case.query, None)
            changes = self._write(session, [(CASE, None, content(CASE, case_snapshot(case)))])
            self._publish(session, "case.create", changes, actor, message or f"new test case {case.query!r}")
            return case_from(changes[0].key, changes[0].after)

    def update_case(self, case_id: int, expected_version: int, case: CaseRecord, actor: str = SYSTEM_ACTOR,
                    message: str = "") -> CaseRecord:
        """Replace a test case's fields if nobody changed it since `expected_version` (else
        StaleEdit, carrying the case as it is now)."""
        try:
            with self._sessions.begin() as session:
                self._begin_publish(session)
                current = self._current_case(session, case_id, expected_version)
                self._check_query_free(session, case.query, case_id)
                changes = self._write(session, [(CASE, str(case_id), content(CASE, case_snapshot(case)))])
                self._publish(session, "case.update", changes, actor, message or f"test case {case.query!r} edited")
                return case_from(str(case_id), changes[0].after) if changes else current
        except StaleDataError as exc:
            raise StaleEdit(f"test case {case_id} changed concurrently: reload and retry",
                            self._maybe(self.case, case_id)) from exc

    def delete_case(self, case_id: int, expected_version: int, actor: str = SYSTEM_ACTOR, message: str = "") -> None:
        with self._sessions.begin() as session:
            self._begin_publish(session)
            current = self._current_case(session, case_id, expected_version)
            changes = self._write(session, [(CASE, str(case_id), None)])
            self._publish(session, "case.delete", changes, actor, message or f"test case {current.query!r} deleted")

    def add_task(self, task: TaskRecord, actor: str = SYSTEM_ACTOR, message: str = "") -> TaskRecord:
        with self._sessions.begin() as session:
            self._begin_publish(session)
            if session.get(Task, task.id) is not None:
                raise StoreConflict(f"a task with id {task.id!r} already exists")
            changes = self._write(session, [(TASK, task.id, content(TASK, task_snapshot(task)))])
            self._publish(session, "task.create", changes, actor, message or f"new task {task.id}")
            return task_from(task.id, changes[0].after)

    def update_task(self, task_id: str, expected_version: int, task: TaskRecord, actor: str = SYSTEM_ACTOR,
                    message: str = "", kind: str = "task.update") -> TaskRecord:
        """Replace a task's fields (its id stays) if nobody changed it since `expected_version`."""
        try:
            with self._sessions.begin() as session:
                self._begin_publish(session)
                row = session.get(Task, task_id)
                if row is None:
                    raise NotFound(f"task {task_id} not found")
                if row.version != expected_version:
                    raise StaleEdit(f"task {task_id} is at version {row.version}, not {expected_version}: "
                                    f"somebody else changed it", _task_record(row))
                wanted = content(TASK, task_snapshot(replace(task, id=task_id)))
                changes = self._write(session, [(TASK, task_id, wanted)])
                self._publish(session, kind, changes, actor, message or f"task {task_id} edited")
                return task_from(task_id, changes[0].after) if changes else _task_record(row)
        except StaleDataError as exc:
            raise StaleEdit(f"task {task_id} changed concurrently: reload and retry",
                            self._maybe(self.task, task_id)) from exc

    def set_task_active(self, task_id: str, expected_version: int, active: bool, actor: str = SYSTEM_ACTOR,
                        message: str = "") -> TaskRecord:
        """Retire (active=False) or reinstate a task. A retired task leaves the search index;
        test cases naming it stay, and are flagged (CatalogStore.cases_naming_retired)."""
        current = self.task(task_id)
        verb = "reinstated" if active else "retired"
        return self.update_task(task_id, expected_version, replace(current, active=active), actor,
                                message or f"task {task_id} {verb}", kind="task.reinstate" if active else "task.retire")

    # -- versions ----------------------------------------------------------------------------
    def versions(self, limit: int = 50, offset: int = 0) -> list[VersionRecord]:
        """Newest first."""
        with self._sessions() as session:
            rows = session.scalars(select(CatalogVersion).order_by(CatalogVersion.id.desc())
                                   .offset(offset).limit(limit))
            return [_version_record(row) for row in rows]

    def record_history(self, kind: str, key: str) -> list[VersionRecord]:
        """Every version that changed the record (`kind`, `key`), newest first (record_changes)."""
        with self._sessions() as session:
            return [_version_record(row) for row in reversed(_versions_touching(session, kind, [key]))]

    def version_count(self) -> int:
        with self._sessions() as session:
            return session.scalar(select(func.count(CatalogVersion.id))) or 0

    def version(self, version_id: int) -> VersionRecord:
        with self._sessions() as session:
            row = session.get(CatalogVersion, version_id)
            if row is None:
                raise NotFound(f"version {version_id} not found")
            return _version_record(row)

    def state_at(self, version_id: int) -> tuple[list[TaskRecord], list[CaseRecord]]:
        """Every task (retired ones included) and test case as they were right after version
        `version_id` was published."""
        with self._sessions() as session:
            if session.get(CatalogVersion, version_id) is None:
                raise NotFound(f"version {version_id} not found")
            return records_of(self._state_at(session, version_id)[0])

    def _state_at(self, session: Session, version_id: int) -> tuple[dict, list[VersionRecord]]:
        later = [_version_record(r) for r in
                 session.scalars(select(CatalogVersion).where(CatalogVersion.id > version_id))]
        return state_at(self._current_state(session), later), later

    def rollback_plan(self, version_id: int) -> RollbackPlan:
        """What `rollback(version_id)` would publish now (catalog.versions.RollbackPlan); also
        the version page's "compared with the current catalog"."""
        with self._sessions() as session:
            if session.get(CatalogVersion, version_id) is None:
                raise NotFound(f"version {version_id} not found")
            latest = session.scalar(select(func.max(CatalogVersion.id)))
            target, _later = self._state_at(session, version_id)
            tasks, cases = records_of(target)
            return RollbackPlan(version_id, latest, tuple(changes_between(self._current_state(session), target)),
                                tuple(tasks), tuple(cases))

    def rollback(self, version_id: int, actor: str = SYSTEM_ACTOR, message: str = "",
                 based_on: int | None = None) -> int | None:
        """Publish, as a new version, the changes that bring every task and test case back to
        their content right after version `version_id`. Returns the new version's id (None when
        the catalog is already in that state). `based_on`: the newest version when the plan
        was shown (RollbackPlan.latest); StaleRollback if a version was published since."""
        with self._sessions.begin() as session:
            self._begin_publish(session)
            if session.get(CatalogVersion, version_id) is None:
                raise NotFound(f"version {version_id} not found")
            latest = session.scalar(select(func.max(CatalogVersion.id)))
            if based_on is not None and latest != based_on:
                raise StaleRollback(f"version {latest} was published after the rollback was previewed "
                                    f"(at version {based_on}): review what it undoes again")
            current = self._current_state(session)
            target, later = self._state_at(session, version_id)
            counters = {key: value + 1 for key, value in last_versions(later).items() if key not in current}
            changes = self._write(session, diff(current, target), recreate_versions=counters)
            return self._publish(session, "rollback", changes, actor,
                                 message or f"rollback to version {version_id}", rollback_of=version_id)

    def versions_after(self, version_id: int) -> list[int]:
        """The ids of every version published after `version_id`, oldest first: what a
        rollback to it undoes (ids may skip numbers, so the pages list them rather than a range)."""
        with self._sessions() as session:
            return list(session.scalars(select(CatalogVersion.id).where(CatalogVersion.id > version_id)
                                        .order_by(CatalogVersion.id)))

    # -- reverting one version (catalog.versions.revert_plan) ---------------------------------------
    def revert_plan(self, version_id: int) -> RevertPlan:
        """What `revert(version_id)` would publish now: the inverse of that version alone, or
        the conflicts that refuse it (NotFound for no such version)."""
        with self._sessions() as session:
            return self._revert_plan(session, version_id)

    def revert(self, version_id: int, actor: str = SYSTEM_ACTOR, message: str = "",
               based_on: int | None = None) -> int:
        """Publish, as a new version (kind "revert", message "Revert version N[: note]"), the
        inverse of version `version_id`'s own changes, leaving every other version's in place.
        RevertRefused (nothing written) where a later version touched one of its records;
        StaleRevert where a version was published after the plan the admin confirmed
        (`based_on`: RevertPlan.latest). Returns the new version's id."""
        with self._sessions.begin() as session:
            self._begin_publish(session)
            plan = self._revert_plan(session, version_id)
            if based_on is not None and plan.latest != based_on:
                raise StaleRevert(f"version {plan.latest} was published after the revert was previewed "
                                  f"(at version {based_on}): review what it changes again")
            if plan.refused:
                raise RevertRefused(plan)
            every = [_version_record(r) for r in
                     session.scalars(select(CatalogVersion).where(CatalogVersion.id >= version_id))]
            counters = {(c.kind, c.key): value + 1 for c in plan.changes if c.before is None
                        for value in [last_versions(every).get((c.kind, c.key), 0)]}
            targets = [(c.kind, c.key, content(c.kind, c.after)) for c in plan.changes]
            changes = self._write(session, targets, recreate_versions=counters)
            title = f"Revert version {version_id}"
            return self._publish(session, "revert", changes, actor, f"{title}: {message}" if message else title)

    def _revert_plan(self, session: Session, version_id: int) -> RevertPlan:
        row = session.get(CatalogVersion, version_id)
        if row is None:
            raise NotFound(f"version {version_id} not found")
        later = [_version_record(r) for r in session.scalars(select(CatalogVersion)
                                                             .where(CatalogVersion.id > version_id))]
        latest = session.scalar(select(func.max(CatalogVersion.id)))
        return revert_plan(_version_record(row), later, self._current_state(session), latest)

    @staticmethod
    def _current_state(session: Session) -> dict:
        return state_of((_task_record(r) for r in session.scalars(select(Task))),
                        (_case_record(r) for r in session.scalars(select(TestCase))), _block_snapshots(session))

    # -- blocks of learned evidence --------------------------------------------------------------
    def block_learned(self, query: str, task_id: str, actor: str = SYSTEM_ACTOR, message: str = "",
                      reason: str = "") -> int | None:
        """Stop the learned pair (query, task_id) from counting, as a published version (kind
        "learned.block", with its audit entry). `query` is the learned evidence's normalised
        query, as the editor lists it. Returns the version id; None when it is blocked already.
        ValueError for an empty or over-long query, NotFound for a task that does not exist."""
        query = _block_query(query)
        with self._sessions.begin() as session:
            self._begin_publish(session)
            if session.get(Task, task_id) is None:
                raise NotFound(f"task {task_id} not found")
            if session.get(LearnedBlock, (query, task_id)) is not None:
                return None
            target = content(BLOCK, block_snapshot(query, task_id, reason))
            changes = self._write(session, [(BLOCK, block_key(query, task_id), target)])
            return self._publish(session, "learned.block", changes, actor,
                                 message or f"learned evidence {query!r} -> {task_id} blocked")

    def unblock_learned(self, query: str, task_id: str, actor: str = SYSTEM_ACTOR, message: str = "") -> int:
        """Let a blocked pair count again, as a published version ("learned.unblock"); NotFound
        when it is not blocked."""
        with self._sessions.begin() as session:
            self._begin_publish(session)
            key = block_key(query, task_id)
            if session.get(LearnedBlock, (query, task_id)) is None:
                raise NotFound(f"learned evidence {query!r} -> {task_id} is not blocked")
            changes = self._write(session, [(BLOCK, key, None)])
            return self._publish(session, "learned.unblock", changes, actor,
                                 message or f"learned evidence {query!r} -> {task_id} unblocked")

    # -- helpers -------------------------------------------------------------------------------
    def _current_case(self, session: Session, case_id: int, expected_version: int) -> CaseRecord:
        row = session.get(TestCase, case_id)
        if row is None:
            raise NotFound(f"test case {case_id} not found")
        if row.version != expected_version:
            raise StaleEdit(f"test case {case_id} is at version {row.version}, not {expected_version}: "
                            f"somebody else changed it", _case_record(row))
        return _case_record(row)

    @staticmethod
    def _check_query_free(session: Session, query: str, case_id: int | None) -> None:
        other = session.scalar(select(TestCase.id).where(TestCase.query == query))
        if other is not None and other != case_id:
            raise StoreConflict(f"another test case (#{other}) already has the query {query!r}")

    @staticmethod
    def _maybe(read, key):
        try:
            return read(key)
        except NotFound:
            return None


def _block_query(query: str) -> str:
    """A block's query as stored (printable, trimmed); ValueError when there is none to block."""
    problem = query_problem(query, MAX_BLOCK_QUERY)
    if problem:
        raise ValueError(problem)
    return printable(query)


#: Keys per SELECT ... IN (...) of _load_rows and _versions_touching: well within SQLite's and
#: PostgreSQL's limits on bound parameters.
LOAD_CHUNK = 500


def _chunks(items: list) -> list[list]:
    return [items[start:start + LOAD_CHUNK] for start in range(0, len(items), LOAD_CHUNK)]


def _load_rows(session: Session, keys: list[tuple[str, str]]) -> dict[tuple[str, str], object]:
    """(kind, key) -> its row, or None where there is none: what session.get gives each, the
    tasks and test cases read by one SELECT ... IN per LOAD_CHUNK keys. An import of the demo's
    200 tasks into an empty store asked 200 SELECTs by primary key, each finding nothing (the
    demo's import 39.5 -> 26.2 ms on SQLite, 84.1 -> 46.0 ms on PostgreSQL: ops/bench_store_import.py).
    Rows the session holds already come back as the same objects, as from session.get."""
    rows: dict[tuple[str, str], object] = {}
    for kind, model in ((TASK, Task), (CASE, TestCase)):
        wanted = list(dict.fromkeys(key for k, key in keys if k == kind))
        found = {row.id: row for chunk in _chunks([_primary_key(kind, key) for key in wanted])
                 for row in session.scalars(select(model).where(model.id.in_(chunk)))}
        rows.update(((kind, key), found.get(_primary_key(kind, key))) for key in wanted)
    for kind, key in keys:
        if kind == BLOCK:   # a composite key (query, task id); an edit names a few
            rows[(kind, key)] = session.get(LearnedBlock, _primary_key(kind, key))
    return {key: rows[key] for key in keys}   # in the targets' order, as they were read before


def _versions_touching(session: Session, kind: str, keys: list[str]) -> list[CatalogVersion]:
    """The versions that changed any of these records of `kind`, oldest first: read through
    record_changes, one statement per LOAD_CHUNK keys."""
    found = {row.id: row for chunk in _chunks(keys) for row in session.scalars(
        select(CatalogVersion).where(CatalogVersion.id.in_(
            select(RecordChange.version_id).where(RecordChange.kind == kind, RecordChange.key.in_(chunk)))))}
    return [found[version_id] for version_id in sorted(found)]


def _primary_key(kind: str, key: str):
    if kind == TASK:
        return key
    return block_pair(key) if kind == BLOCK else int(key)


def _new_row(kind: str, key: str | None):
    if kind == TASK:
        return Task(id=key)
    if kind == BLOCK:
        query, task_id = block_pair(key)
        return LearnedBlock(query=query, task_id=task_id)
    return TestCase(id=None if key is None else int(key))


def _snapshot(kind: str, row) -> dict:
    if kind == BLOCK:
        return block_snapshot(row.query, row.task_id, row.reason)
    return task_snapshot(_task_record(row)) if kind == TASK else case_snapshot(_case_record(row))


def _assign(kind: str, row, target: dict) -> None:
    if kind == BLOCK:
        row.reason = target.get("reason") or ""
    elif kind == TASK:
        row.name, row.help, row.category = target["name"], target["help"] or "", target["category"]
        row.aliases, row.url, row.roles = list(target["aliases"] or ()), target["url"], list(target["roles"] or ())
        row.active = bool(target["active"])
    else:
        row.query, row.gold, row.rationale = target["query"], list(target["gold"] or ()), target["rationale"] or ""
        row.category = target["category"]


def _version_record(row: CatalogVersion) -> VersionRecord:
    return VersionRecord(row.id, row.at, row.actor, row.kind, row.message, row.store_revision, row.rollback_of,
                         tuple(Change.from_dict(c) for c in row.changes))
