"""Catalog/lexicon versions: the pure half (snapshots, changesets, reconstruction, diffs).

Every published change (a page or JSON API edit, an import from the page or the CLI, a
rollback) is one row of `catalog_versions`, written by CatalogStore in the same transaction as
the change. A row holds a **changeset**, not a snapshot: for each record it touched,
`{"kind": "task"|"case"|"block", "key": <task id | case id as text | block key>, "before": {...}|None,
"after": {...}|None}` (None: the record did not exist on that side). A "block" is a (normalised
query, task) pair of learned evidence an admin stopped from counting (table learned_blocks); its
key is `block_key(query, task_id)` and it has no record version (it is created or removed, never
edited in place).

Why changesets rather than full snapshots: an edit of one test case stores one small change
instead of 200 tasks and 258 cases, the history page can show exactly what each version did
without diffing two snapshots, and the audit entry of a version is the same before/after. The
state at version N is reconstructed from the current state by undoing, newest first, every
version published after N (`state_at`). That is exact because no write bypasses the store and
every store write records its changeset in its own transaction, serialised by the store's
revision row lock, so version ids follow the order in which changes were committed.

A rollback to N publishes the diff current -> state at N as a new version (kind "rollback"):
it undoes every version published *after* N, and keeps N. To undo version N alone (like
`git revert`), a revert (kind "revert", `revert_plan`) publishes the inverse of N's own changeset:
each record N touched goes back to its `before`. It is refused, record by record, where a later
version touched the same record (undoing N there would silently discard that later change), where
a re-created or renamed test case would take a query another case holds now, and where it would
leave a test case or a block naming a task that would not exist.


history only grows, and a rollback can itself be rolled back. Before it does, the admin sees
that same diff (`changes_between`, a RollbackPlan): what rolling back would undo, record by
record, and which newest version the plan was computed at, so that a rollback confirmed on a
plan that has gone stale (somebody published meanwhile) is refused, never applied blindly. The lexicon (term -> task links,
pins) is derived from the test cases, so versioning the cases versions the lexicon.

Record versions (the optimistic-locking counters) travel in the snapshots but are not part of
a record's content: a rollback restores content, while the counters only move forward, so an
editor holding a page from before the rollback still gets a conflict, never a silent overwrite.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Iterable, Mapping, Sequence

from catalog.records import CaseRecord, TaskRecord

TASK, CASE, BLOCK = "task", "case", "block"
TASK_FIELDS = ("name", "help", "category", "aliases", "url", "roles", "active")
CASE_FIELDS = ("query", "gold", "rationale", "category")
BLOCK_FIELDS = ("query", "task_id", "reason")
FIELDS = {TASK: TASK_FIELDS, CASE: CASE_FIELDS, BLOCK: BLOCK_FIELDS}

Key = tuple[str, str]                 # (kind, key)
Snapshot = dict                       # content fields, plus "version"
State = dict[Key, Snapshot]


@dataclass(frozen=True)
class Change:
    kind: str
    key: str
    before: Snapshot | None
    after: Snapshot | None

    @property
    def action(self) -> str:
        if self.before is None:
            return "created"
        if self.after is None:
            return "deleted"
        return "updated"

    @property
    def label(self) -> str:
        """What the change is about, for people: the task id, or the (blocked) query."""
        side = self.after or self.before or {}
        return side.get("query", self.key) if self.kind in (CASE, BLOCK) else self.key

    def fields(self) -> list[tuple[str, object, object]]:
        """(field, before, after) of every content field that differs."""
        before, after = self.before or {}, self.after or {}
        return [(f, before.get(f), after.get(f)) for f in FIELDS[self.kind]
                if before.get(f) != after.get(f)]

    def as_dict(self) -> dict:
        return {"kind": self.kind, "key": self.key, "before": self.before, "after": self.after}

    @classmethod
    def from_dict(cls, row: Mapping) -> "Change":
        return cls(row["kind"], str(row["key"]), row.get("before"), row.get("after"))


@dataclass(frozen=True)
class VersionRecord:
    id: int
    at: datetime
    actor: str
    kind: str
    message: str
    store_revision: int
    rollback_of: int | None
    changes: tuple[Change, ...]

    def summary(self) -> dict:
        counts = {TASK: 0, CASE: 0, BLOCK: 0}
        for change in self.changes:
            counts[change.kind] += 1
        return counts

    def as_dict(self, with_changes: bool = True) -> dict:
        row = {"id": self.id, "at": self.at.isoformat(), "actor": self.actor, "kind": self.kind,
               "message": self.message, "store_revision": self.store_revision, "rollback_of": self.rollback_of,
               "counts": self.summary()}
        if with_changes:
            row["changes"] = [c.as_dict() for c in self.changes]
        return row


# -- snapshots ---------------------------------------------------------------------------------
def task_snapshot(task: TaskRecord) -> Snapshot:
    return {"name": task.name, "help": task.help, "category": task.category, "aliases": list(task.aliases),
            "url": task.url, "roles": list(task.roles), "active": bool(task.active), "version": task.version}


def case_snapshot(case: CaseRecord) -> Snapshot:
    return {"query": case.query, "gold": list(case.gold), "rationale": case.rationale,
            "category": case.category, "version": case.version}


def block_key(query: str, task_id: str) -> str:
    """A blocked pair's key in a changeset: unambiguous whatever the query holds."""
    return json.dumps([query, task_id], ensure_ascii=False)


def block_pair(key: str) -> tuple[str, str]:
    """(query, task_id) of a block key."""
    query, task_id = json.loads(key)
    return query, task_id


def block_snapshot(query: str, task_id: str, reason: str = "") -> Snapshot:
    return {"query": query, "task_id": task_id, "reason": reason, "version": None}


def content(kind: str, snapshot: Snapshot | None) -> dict | None:
    """The snapshot without its optimistic-locking version (what a rollback restores)."""
    if snapshot is None:
        return None
    return {f: snapshot.get(f) for f in FIELDS[kind]}


def task_from(key: str, snapshot: Snapshot) -> TaskRecord:
    return TaskRecord(id=key, name=snapshot["name"], help=snapshot.get("help") or "",
                      category=snapshot.get("category"), aliases=tuple(snapshot.get("aliases") or ()),
                      url=snapshot.get("url"), roles=tuple(snapshot.get("roles") or ()),
                      active=bool(snapshot.get("active", True)), version=snapshot.get("version"))


def case_from(key: str, snapshot: Snapshot) -> CaseRecord:
    return CaseRecord(query=snapshot["query"], gold=tuple(snapshot.get("gold") or ()),
                      rationale=snapshot.get("rationale") or "", category=snapshot.get("category"),
                      id=int(key), version=snapshot.get("version"))


def state_of(tasks: Iterable[TaskRecord], cases: Iterable[CaseRecord],
             blocks: Iterable[Snapshot] = ()) -> State:
    """The versioned state: tasks, test cases and learned-evidence blocks (block_snapshot)."""
    state: State = {(TASK, t.id): task_snapshot(t) for t in tasks}
    state.update({(CASE, str(c.id)): case_snapshot(c) for c in cases})
    state.update({(BLOCK, block_key(b["query"], b["task_id"])): b for b in blocks})
    return state


def records_of(state: State) -> tuple[list[TaskRecord], list[CaseRecord]]:
    """(tasks sorted by id, cases sorted by id): the order CatalogStore reads them in."""
    tasks = sorted((task_from(key, s) for (kind, key), s in state.items() if kind == TASK), key=lambda t: t.id)
    cases = sorted((case_from(key, s) for (kind, key), s in state.items() if kind == CASE), key=lambda c: c.id)
    return tasks, cases


# -- reconstruction and diffs ----------------------------------------------------------------
def undo(state: State, changes: Sequence[Change]) -> State:
    """The state before `changes` were applied to `state` (a new dict)."""
    earlier = dict(state)
    for change in reversed(changes):
        if change.before is None:
            earlier.pop((change.kind, change.key), None)
        else:
            earlier[(change.kind, change.key)] = dict(change.before)
    return earlier


def state_at(current: State, later: Sequence[VersionRecord]) -> State:
    """The state right after a version N, given the current state and every version published
    after N (any order): undo them newest first."""
    state = current
    for version in sorted(later, key=lambda v: v.id, reverse=True):
        state = undo(state, version.changes)
    return state


def diff(current: State, target: State) -> list[tuple[str, str, dict | None]]:
    """What turns `current` into `target`, by content: (kind, key, target content or None to
    delete), tasks before cases, keys in a stable order."""
    out = []
    for key in sorted(set(current) | set(target), key=lambda k: (k[0] != TASK, k[0], _sortable(k[1]))):
        kind = key[0]
        now, then = content(kind, current.get(key)), content(kind, target.get(key))
        if now != then:
            out.append((kind, key[1], then))
    return out


def changes_between(current: State, target: State) -> list[Change]:
    """What turns `current` into `target`, as Changes (before: the record now; after: the
    record in `target`; None where it does not exist), in `diff`'s order."""
    return [Change(kind, key, current.get((kind, key)), target.get((kind, key)))
            for kind, key, _then in diff(current, target)]


@dataclass(frozen=True)
class RollbackPlan:
    """What a rollback to `version_id` would publish, computed when the newest version was
    `latest`: `changes` (now -> then) and the records as they were then."""

    version_id: int
    latest: int | None
    changes: tuple[Change, ...]
    tasks: tuple[TaskRecord, ...]
    cases: tuple[CaseRecord, ...]


def last_versions(versions: Iterable[VersionRecord]) -> dict[Key, int]:
    """The highest record version each record reached in `versions` (so that a record a
    rollback re-creates continues its counter instead of restarting at 1)."""
    highest: dict[Key, int] = {}
    for version in versions:
        for change in version.changes:
            for side in (change.before, change.after):
                if side and side.get("version") is not None:
                    key = (change.kind, change.key)
                    highest[key] = max(highest.get(key, 0), int(side["version"]))
    return highest


def _sortable(key: str) -> tuple:
    return (0, int(key), "") if key.isdigit() else (1, 0, key)


# -- reverting one version (like `git revert`) -------------------------------------------------
@dataclass(frozen=True)
class RevertConflict:
    """Why one record of version N cannot go back: `later`, the versions published after N that
    touched it (or, for a clash, the record in the way), newest last."""

    kind: str
    key: str
    label: str
    later: tuple[int, ...]
    reason: str

    def sentence(self, version_id: int) -> str:
        """The refusal in words, naming the record and the later version(s)."""
        return f"{_record_words(self.kind, self.key, self.label)} {self.reason}" + _later_words(self.later, version_id)


@dataclass(frozen=True)
class RevertPlan:
    """What reverting `version_id` alone would publish, computed when the newest version was
    `latest`: `changes` (before: the record now; after: what it goes back to, None to delete it),
    or the `conflicts` that refuse it; `tasks` and `cases`: the catalog after the revert."""

    version_id: int
    latest: int | None
    changes: tuple[Change, ...]
    conflicts: tuple[RevertConflict, ...]
    tasks: tuple[TaskRecord, ...]
    cases: tuple[CaseRecord, ...]

    @property
    def refused(self) -> bool:
        return bool(self.conflicts)

    def refusal(self) -> str:
        """One message naming every record in the way and the later version that touched it."""
        return (f"Version {self.version_id} cannot be reverted on its own: "
                + "; ".join(c.sentence(self.version_id) for c in self.conflicts) + ".")


def revert_plan(version: VersionRecord, later: Sequence[VersionRecord], current: State,
                latest: int | None) -> RevertPlan:
    """The inverse of `version`'s own changeset applied to `current`, given every version
    published after it (`later`). A record a later version touched is a conflict (its current
    content is no longer what `version` left, so going back would discard the later change)."""
    touched = _touched_by(later)
    conflicts = [RevertConflict(c.kind, c.key, c.label, touched[(c.kind, c.key)], "was changed again by")
                 for c in version.changes if (c.kind, c.key) in touched]
    blocked = {(c.kind, c.key) for c in conflicts}
    changes = tuple(Change(c.kind, c.key, current.get((c.kind, c.key)), c.before)
                    for c in _ordered(version.changes) if (c.kind, c.key) not in blocked)
    after = apply(current, changes)
    if not conflicts:
        conflicts = _query_clashes(changes, after, touched) + _dangling(current, after, touched)
    tasks, cases = records_of(after)
    return RevertPlan(version.id, latest, changes if not conflicts else (), tuple(conflicts),
                      tuple(tasks), tuple(cases))


def apply(state: State, changes: Sequence[Change]) -> State:
    """The state after `changes` (a new dict): the counterpart of `undo`."""
    later = dict(state)
    for change in changes:
        if change.after is None:
            later.pop((change.kind, change.key), None)
        else:
            later[(change.kind, change.key)] = dict(change.after)
    return later


def _touched_by(versions: Iterable[VersionRecord]) -> dict[Key, tuple[int, ...]]:
    """{record: the ids of the versions among `versions` that changed it, oldest first}."""
    touched: dict[Key, list[int]] = {}
    for version in sorted(versions, key=lambda v: v.id):
        for change in version.changes:
            ids = touched.setdefault((change.kind, change.key), [])
            if version.id not in ids:
                ids.append(version.id)
    return {key: tuple(ids) for key, ids in touched.items()}


def _ordered(changes: Iterable[Change]) -> list[Change]:
    """Tasks before cases before blocks, keys in `diff`'s stable order: the page lists them so."""
    rank = {TASK: 0, CASE: 1, BLOCK: 2}
    return sorted(changes, key=lambda c: (rank.get(c.kind, 3), _sortable(c.key)))


def _query_clashes(changes: Sequence[Change], after: State, touched: dict) -> list[RevertConflict]:
    """A test case the revert re-creates or renames onto a query that another case holds (the
    query is unique): that other case took it in a later version."""
    holders: dict[str, list[str]] = {}
    for (kind, key), snapshot in after.items():
        if kind == CASE:
            holders.setdefault(snapshot["query"], []).append(key)
    clashes = []
    for change in changes:
        if change.kind != CASE or change.after is None:
            continue
        others = [k for k in holders.get(change.after["query"], []) if k != change.key]
        for other in others:
            clashes.append(RevertConflict(CASE, change.key, change.after["query"], touched.get((CASE, other), ()),
                                          f"would take the query that test case #{other} holds now, set by"))
    return clashes


def _dangling(current: State, after: State, touched: dict) -> list[RevertConflict]:
    """A test case's gold or a block naming a task that the revert would leave missing (a task
    is never referenced by a key the database checks, so the revert must)."""
    tasks_after = {key for kind, key in after if kind == TASK}
    found = []
    for (kind, key), snapshot in sorted(after.items(), key=lambda item: (item[0][0], _sortable(item[0][1]))):
        named = snapshot.get("gold") or () if kind == CASE else (snapshot.get("task_id"),) if kind == BLOCK else ()
        missing = [t for t in named if t not in tasks_after]
        before = current.get((kind, key)) or {}
        was_missing = {t for t in (before.get("gold") or (before.get("task_id"),)) if t and (TASK, t) not in current}
        for task_id in missing:
            if task_id in was_missing:
                continue
            later = tuple(sorted(set(touched.get((kind, key), ())) | set(touched.get((TASK, task_id), ()))))
            label = snapshot.get("query", key)
            found.append(RevertConflict(kind, key, label, later,
                                        f"would name task {task_id}, which would not exist; see"))
    return found


def _record_words(kind: str, key: str, label: str) -> str:
    if kind == CASE:
        return f"test case #{key} \u201c{label}\u201d"
    if kind == BLOCK:
        return f"the block of learned evidence \u201c{label}\u201d"
    return f"task {key}"


def _later_words(later: Sequence[int], version_id: int) -> str:
    if not later:
        return f" a change made after version {version_id}"
    names = ", ".join(str(v) for v in later)
    return f" version{'s' if len(later) > 1 else ''} {names} (after version {version_id}): revert " \
           f"{'them' if len(later) > 1 else 'it'} first, or edit the record by hand"
