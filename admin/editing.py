"""The editor's pure middle: a proposed change (from a form or a JSON body), validated by the
very rules the import files obey (catalog.formats), and the catalog as it would be with the
change applied. No I/O here: the views read the store, call these, and write the store.

A `Proposal` is one edit of one record: save (create or update) a test case or a task, delete
a test case, retire or reinstate a task. It carries the record version the editor started from
(`base_version`), so the publish that follows a preview can tell that somebody else changed the
record meanwhile.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from catalog.formats import ImportRejected, validate_cases, validate_tasks
from catalog.records import CaseRecord, TaskRecord
from catalog.validation import MAX_ID, bounded_id

CASE, TASK = "case", "task"
CASE_ACTIONS = ("save", "delete")
TASK_ACTIONS = ("save", "retire", "reinstate")
MAX_MESSAGE = 300
_LINE_PREFIX = re.compile(r"^line \d+: ")
_ID_SEPARATORS = re.compile(r"[\s,]+")


class InvalidProposal(ValueError):
    """The form or body does not describe a valid change; `errors` name the fields."""

    def __init__(self, errors: list[str]):
        super().__init__("; ".join(errors))
        self.errors = errors


@dataclass(frozen=True)
class Proposal:
    kind: str                          # CASE or TASK
    action: str                        # save, delete (case); save, retire, reinstate (task)
    record: CaseRecord | TaskRecord    # the record as proposed (for delete/retire: as it is)
    base_version: int | None           # the version the editor started from; None: a new record
    message: str = ""

    @property
    def is_new(self) -> bool:
        return self.base_version is None

    @property
    def key(self) -> str | None:
        """The record's id as text (None for a test case not created yet)."""
        return None if self.record.id is None else str(self.record.id)

    @property
    def queries(self) -> list[str]:
        """The edited query (a case), or the queries of the cases that name the task (a task
        edit changes how they rank): the queries a preview must show."""
        return [self.record.query] if self.kind == CASE else []

    def form_fields(self) -> list[tuple[str, str]]:
        """Hidden fields that carry this proposal from the preview page to the publish."""
        fields = [("action", self.action), ("message", self.message),
                  ("base_version", "" if self.base_version is None else str(self.base_version))]
        if self.kind == CASE:
            case = self.record
            fields += [("case_id", "" if case.id is None else str(case.id)), ("query", case.query),
                       ("rationale", case.rationale), ("category", case.category or "")]
            fields += [("gold", task_id) for task_id in case.gold]
        else:
            task = self.record
            fields += [("task_id", task.id), ("name", task.name), ("help", task.help),
                       ("category", task.category or ""), ("aliases", "\n".join(task.aliases)),
                       ("url", task.url or ""), ("roles", ", ".join(task.roles))]
        return fields


# -- from a form or a JSON body ----------------------------------------------------------------
def _errors_of(exc: ImportRejected) -> list[str]:
    return [_LINE_PREFIX.sub("", e) for e in exc.errors]


def _number(raw: object, field: str, required: bool) -> tuple[int | None, list[str]]:
    """A record id or version from a form field or a JSON value (None when absent and not
    required), within what its 32-bit column holds (catalog.validation.bounded_id)."""
    if raw in (None, ""):
        return None, [f"field '{field}': required (the version your edit is based on)"] if required else []
    value = bounded_id(raw)
    if value is None:
        return None, [f"field '{field}': must be a whole number from 0 to {MAX_ID}, not {str(raw)[:40]!r}"]
    return value, []


def _version(raw: object, required: bool, field: str = "version") -> tuple[int | None, list[str]]:
    return _number(raw, field, required)


def case_row(query: str, gold: Sequence[str], rationale: str, category: str) -> dict:
    """A test-case row as in a JSON Lines file (empty optional fields left out)."""
    row: dict = {"query": query, "gold": list(gold)}
    if rationale.strip():
        row["rationale"] = rationale
    if category.strip():
        row["category"] = category.strip()
    return row


def validate_case_row(row: object, known_task_ids: set[str], case_id: int | None) -> CaseRecord:
    """One test case, checked exactly like a line of an imported cases file."""
    try:
        [case] = validate_cases([(1, row)], known_task_ids, "test case")
    except ImportRejected as exc:
        raise InvalidProposal(_errors_of(exc)) from exc
    return replace(case, id=case_id)


def validate_task_row(row: object) -> TaskRecord:
    """One task, checked exactly like a line of an imported catalog file."""
    try:
        [task] = validate_tasks([(1, row)], "task")
    except ImportRejected as exc:
        raise InvalidProposal(_errors_of(exc)) from exc
    return task


def gold_from_form(form) -> list[str]:
    """Gold task ids: the ticked ones (`gold`, repeatable) and any typed in `gold_add`
    (separated by commas or spaces; the way to pick without JavaScript), without repeats."""
    picked = [g.strip() for g in form.getlist("gold") if g.strip()]
    picked += [g for g in _ID_SEPARATORS.split(form.get("gold_add", "")) if g]
    return list(dict.fromkeys(picked))


def case_proposal_from_form(form, known_task_ids: set[str]) -> Proposal:
    action = form.get("action", "save")
    if action not in CASE_ACTIONS:
        raise InvalidProposal([f"field 'action': must be one of {', '.join(CASE_ACTIONS)}"])
    case_id, errors = _number(form.get("case_id"), "case_id", required=False)
    base, more = _version(form.get("base_version"), case_id is not None, "base_version")
    errors += more
    if errors:
        raise InvalidProposal(errors)
    row = case_row(form.get("query", "").strip(), gold_from_form(form), form.get("rationale", ""),
                   form.get("category", ""))
    if action == "delete" and case_id is None:
        raise InvalidProposal(["only a stored test case can be deleted"])
    record = validate_case_row(row, known_task_ids, case_id)
    return Proposal(CASE, action, record, base, form.get("message", "").strip()[:MAX_MESSAGE])


def split_list(text: str, separator: str) -> list[str]:
    return [item.strip() for item in text.split(separator) if item.strip()]


def task_row(form, active: bool) -> dict:
    """The task row the editor's form describes (validate_task_row checks it): aliases one per
    line, roles separated by commas, the optional fields only where filled in; `active` as the
    stored task has it (a new task: True)."""
    category, url = form.get("category", ""), form.get("url", "")
    aliases, roles = split_list(form.get("aliases", ""), "\n"), split_list(form.get("roles", ""), ",")
    row: dict = {"id": form.get("task_id", "").strip(), "name": form.get("name", "").strip(),
                 "help": form.get("help", "").strip()}
    if category.strip():
        row["category"] = category.strip()
    if aliases:
        row["aliases"] = list(aliases)
    if url.strip():
        row["url"] = url.strip()
    if roles:
        row["roles"] = list(roles)
    row["active"] = active
    return row


def task_proposal_from_form(form, existing: TaskRecord | None) -> Proposal:
    """A task edit; `existing` is the stored task of that id (None: a new task). Aliases are
    one per line, roles separated by commas. Retire/reinstate keep the stored fields."""
    action = form.get("action", "save")
    if action not in TASK_ACTIONS:
        raise InvalidProposal([f"field 'action': must be one of {', '.join(TASK_ACTIONS)}"])
    base, errors = _version(form.get("base_version"), existing is not None, "base_version")
    if errors:
        raise InvalidProposal(errors)
    message = form.get("message", "").strip()[:MAX_MESSAGE]
    if action in ("retire", "reinstate"):
        if existing is None:
            raise InvalidProposal(["only a stored task can be retired or reinstated"])
        return Proposal(TASK, action, replace(existing, active=action == "reinstate"), base, message)
    active = existing.active if existing is not None else True
    row = task_row(form, active)
    return Proposal(TASK, action, validate_task_row(row), base, message)


def case_proposal_from_json(body: object, known_task_ids: set[str], case_id: int | None) -> Proposal:
    """POST /admin/api/cases (case_id None) or PUT /admin/api/cases/<id> (a `version` needed)."""
    if not isinstance(body, dict):
        raise InvalidProposal(["the body must be a JSON object"])
    base, errors = _version(body.get("version"), required=case_id is not None)
    if errors:
        raise InvalidProposal(errors)
    row = {k: v for k, v in body.items() if k not in ("version", "message", "id")}
    return Proposal(CASE, "save", validate_case_row(row, known_task_ids, case_id), base,
                    str(body.get("message", ""))[:MAX_MESSAGE])


def task_proposal_from_json(body: object, task_id: str | None, existing: TaskRecord | None) -> Proposal:
    """POST /admin/api/tasks (the id in the body) or PUT /admin/api/tasks/<id> (`version` needed;
    a stored task keeps its active flag unless the body says otherwise)."""
    if not isinstance(body, dict):
        raise InvalidProposal(["the body must be a JSON object"])
    base, errors = _version(body.get("version"), required=task_id is not None)
    if errors:
        raise InvalidProposal(errors)
    row = {k: v for k, v in body.items() if k not in ("version", "message")}
    if task_id is not None:
        if row.get("id", task_id) != task_id:
            raise InvalidProposal(["field 'id': a task's id cannot change (create a new task and retire this one)"])
        row["id"] = task_id
    if existing is not None:
        row.setdefault("active", existing.active)
    return Proposal(TASK, "save", validate_task_row(row), base, str(body.get("message", ""))[:MAX_MESSAGE])


# -- the catalog with a change applied -------------------------------------------------------------
def apply_proposal(tasks: Sequence[TaskRecord], cases: Sequence[CaseRecord],
                   proposal: Proposal) -> tuple[list[TaskRecord], list[CaseRecord]]:
    """(tasks, cases) as they would be once `proposal` is published: the `after` side of a
    preview. `tasks` are every task (retired ones included); the order of both is kept, a new
    record goes last."""
    tasks, cases = list(tasks), list(cases)
    record = proposal.record
    if proposal.kind == CASE:
        others = [c for c in cases if record.id is None or c.id != record.id]
        if proposal.action == "delete":
            return tasks, others
        if record.id is None:
            return tasks, [*cases, record]
        return tasks, [record if c.id == record.id else c for c in cases]
    if any(t.id == record.id for t in tasks):
        return [record if t.id == record.id else t for t in tasks], cases
    return [*tasks, record], cases


def active(tasks: Sequence[TaskRecord]) -> list[TaskRecord]:
    """The tasks the search index holds (retired ones leave it)."""
    return [t for t in tasks if t.active]


def retired_gold(case: CaseRecord, tasks_by_id: Mapping[str, TaskRecord]) -> list[str]:
    """The gold task ids of `case` that name a retired task (flagged wherever the case shows)."""
    return [g for g in case.gold if g in tasks_by_id and not tasks_by_id[g].active]


def cases_naming(task_id: str, cases: Sequence[CaseRecord]) -> list[CaseRecord]:
    return [c for c in cases if task_id in c.gold]
