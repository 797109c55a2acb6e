"""CatalogStore: the only code that reads or writes tasks and test cases in the database.

Writes run in one transaction each and bump the store revision in that same transaction, so
an import is all-or-nothing and a search index can ask "has anything changed?" with one read.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import time

from sqlalchemy import Engine, delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.orm.exc import StaleDataError

from catalog.models import RankerFit, StoreRevision, Task, TestCase
from catalog.records import CaseRecord, TaskRecord

REVISION_ROW = "catalog"


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


class NotFound(KeyError):
    pass


class StoreNotMigrated(RuntimeError):
    """The database lacks what the migrations create (here: the seeded store revision row)."""


def _task_record(row: Task) -> TaskRecord:
    return TaskRecord(id=row.id, name=row.name, help=row.help or "", category=row.category,
                      aliases=tuple(row.aliases or ()), url=row.url, roles=tuple(row.roles or ()),
                      active=row.active)


def _fit_record(row: RankerFit) -> FitRecord:
    return FitRecord(row.id, row.store_revision, row.cases_digest, row.created_at, row.params, row.report)


def _case_record(row: TestCase) -> CaseRecord:
    return CaseRecord(id=row.id, query=row.query, gold=tuple(row.gold or ()), rationale=row.rationale or "",
                      category=row.category, version=row.version)


class CatalogStore:
    def __init__(self, engine: Engine):
        self.engine = engine
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

    def import_tasks(self, tasks: list[TaskRecord], replace: bool = False) -> dict:
        """Upsert `tasks` by id. With `replace`, tasks absent from the list are deleted, unless a
        test case still names one (then nothing is written and StoreConflict says which)."""
        incoming = {t.id: t for t in tasks}
        with self._sessions.begin() as session:
            existing = {row.id: row for row in session.scalars(select(Task))}
            removed = set(existing) - set(incoming) if replace else set()
            if removed:
                referencing = [c for c in session.scalars(select(TestCase)) if removed & set(c.gold)]
                if referencing:
                    names = ", ".join(sorted(removed & {g for c in referencing for g in c.gold}))
                    raise StoreConflict(f"cannot remove task(s) still named by test cases: {names}")
                session.execute(delete(Task).where(Task.id.in_(removed)))
            created = updated = 0
            for task in tasks:
                row = existing.get(task.id)
                if row is None:
                    session.add(Task(id=task.id, name=task.name, help=task.help, category=task.category,
                                     aliases=list(task.aliases), url=task.url, roles=list(task.roles),
                                     active=task.active))
                    created += 1
                elif _task_record(row) != task:
                    row.name, row.help, row.category = task.name, task.help, task.category
                    row.aliases, row.url, row.roles, row.active = list(task.aliases), task.url, list(task.roles), task.active
                    updated += 1
            self._bump(session)
        return {"created": created, "updated": updated, "removed": len(removed),
                "unchanged": len(tasks) - created - updated}

    def import_cases(self, cases: list[CaseRecord], replace: bool = False) -> dict:
        """Upsert test cases keyed by their query text; with `replace`, drop all others."""
        with self._sessions.begin() as session:
            if replace:
                session.execute(delete(TestCase).where(TestCase.query.not_in([c.query for c in cases])))
            existing = {row.query: row for row in session.scalars(select(TestCase))}
            created = updated = 0
            for case in cases:
                row = existing.get(case.query)
                if row is None:
                    session.add(TestCase(query=case.query, gold=list(case.gold), rationale=case.rationale,
                                         category=case.category))
                    created += 1
                elif (tuple(row.gold), row.rationale, row.category) != (case.gold, case.rationale, case.category):
                    row.gold, row.rationale, row.category = list(case.gold), case.rationale, case.category
                    updated += 1
            self._bump(session)
        return {"created": created, "updated": updated, "unchanged": len(cases) - created - updated}

    def add_case(self, case: CaseRecord) -> CaseRecord:
        with self._sessions.begin() as session:
            if session.scalar(select(TestCase.id).where(TestCase.query == case.query)) is not None:
                raise StoreConflict(f"a test case with query {case.query!r} already exists")
            row = TestCase(query=case.query, gold=list(case.gold), rationale=case.rationale, category=case.category)
            session.add(row)
            self._bump(session)
        return _case_record(row)

    def update_case(self, case_id: int, expected_version: int, case: CaseRecord) -> CaseRecord:
        """Replace a test case's fields if nobody changed it since `expected_version`."""
        try:
            with self._sessions.begin() as session:
                row = session.get(TestCase, case_id)
                if row is None:
                    raise NotFound(f"test case {case_id} not found")
                if row.version != expected_version:
                    raise StoreConflict(f"test case {case_id} is at version {row.version}, "
                                        f"not {expected_version}: reload and retry")
                row.query, row.gold, row.rationale, row.category = case.query, list(case.gold), case.rationale, case.category
                self._bump(session)
        except StaleDataError as exc:
            raise StoreConflict(f"test case {case_id} changed concurrently: reload and retry") from exc
        return _case_record(row)

    def delete_case(self, case_id: int, expected_version: int) -> None:
        with self._sessions.begin() as session:
            row = session.get(TestCase, case_id)
            if row is None:
                raise NotFound(f"test case {case_id} not found")
            if row.version != expected_version:
                raise StoreConflict(f"test case {case_id} is at version {row.version}, not {expected_version}")
            session.delete(row)
            self._bump(session)
