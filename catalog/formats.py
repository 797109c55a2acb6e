"""File formats of the catalog and the test cases: JSON Lines (both) and CSV (catalog).

Every row is validated against a JSON schema, then against the other rows (duplicate ids,
gold ids that name no task). A file with any bad row is rejected whole: `ImportRejected`
carries one message per problem, each naming the line and the field.
"""
from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Iterable

from jsonschema import Draft202012Validator

from catalog.records import CaseRecord, TaskRecord
from catalog.validation import JSONRefused, decode_json, json_problem, task_id_problem, url_problem
from infra.rows import RowRefused, all_or_nothing
from infra.words import counted

#: Fields whose text may hold line breaks and tabs (every other field is one line).
MULTILINE_FIELDS = frozenset({"help", "rationale"})
#: One-line text fields whose tabs and line breaks are folded to a space on import (fold_line_breaks).
FOLDED_FIELDS = frozenset({"name", "aliases", "category", "query"})
_LINE_BREAKS = re.compile(r"[ \t\r\n]*[\t\r\n][ \t\r\n]*")
CASE_CATEGORIES = ("exact", "synonym", "abbreviation", "natural_language", "multi_word", "typo")
MAX_GOLD = 5

_SHORT_TEXT = {"type": "string", "minLength": 1, "maxLength": 300}
_ID = {"type": "string", "minLength": 1, "maxLength": 128, "pattern": r"^\S(.*\S)?$"}

TASK_ROW_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "catalog row",
    "type": "object",
    "required": ["id", "name", "help"],
    "additionalProperties": False,
    "properties": {
        "id": _ID,
        "name": _SHORT_TEXT,
        "help": {"type": "string", "maxLength": 5000},
        "category": {"type": "string", "maxLength": 64},
        "aliases": {"type": "array", "items": _SHORT_TEXT, "maxItems": 50},
        "url": {"type": "string", "maxLength": 500},
        "roles": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 64},
                  "maxItems": 50},
        "active": {"type": "boolean"},
    },
}

CASE_ROW_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "test-case row",
    "type": "object",
    "required": ["query", "gold"],
    "additionalProperties": False,
    "properties": {
        "query": {"type": "string", "minLength": 1, "maxLength": 500},
        "gold": {"type": "array", "items": _ID, "maxItems": MAX_GOLD, "uniqueItems": True},
        "rationale": {"type": "string", "maxLength": 5000},
        "category": {"type": "string", "enum": list(CASE_CATEGORIES)},
    },
}

_TASK_VALIDATOR = Draft202012Validator(TASK_ROW_SCHEMA)
_CASE_VALIDATOR = Draft202012Validator(CASE_ROW_SCHEMA)
CSV_COLUMNS = ("id", "name", "help", "category", "aliases", "url", "roles")
CSV_LIST_SEPARATOR = "|"


class ImportRejected(ValueError):
    """A file failed validation; nothing was written. `errors` names each bad line and field."""

    def __init__(self, source: str, errors: list[str]):
        self.source = source
        self.errors = errors
        shown = "\n".join(f"  {e}" for e in errors[:50])
        more = f"\n  ... and {len(errors) - 50} more" if len(errors) > 50 else ""
        super().__init__(f"{source}: rejected, {counted(len(errors), 'error')}, nothing imported:\n{shown}{more}")


Row = tuple[int, object]  # (line number, parsed value)


def parse_jsonl(text: str) -> tuple[list[Row], list[str]]:
    rows: list[Row] = []
    errors: list[str] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append((lineno, decode_json(line)))   # the app's one JSON decoding step
        except JSONRefused as exc:   # a lone surrogate, even in a key: named, never echoed
            errors.append(f"line {lineno}: field '{exc.field.replace('[', '/').replace(']', '') or '(row)'}': "
                          f"{exc.problem}")
        except json.JSONDecodeError as exc:
            errors.append(f"line {lineno}: invalid JSON ({exc.msg} at column {exc.colno})")
        except ValueError as exc:   # nested too deeply to parse; an integer of more than 4,300 digits
            errors.append(f"line {lineno}: invalid JSON ({str(exc)[:120]})")
    return rows, errors


def parse_catalog_csv(text: str) -> tuple[list[Row], list[str]]:
    """CSV with a header of CSV_COLUMNS; list columns are '|'-separated."""
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in ("id", "name", "help") if c not in (reader.fieldnames or [])]
    if missing:
        return [], [f"line 1: header lacks {'column' if len(missing) == 1 else 'columns'} {', '.join(missing)}"]
    unknown = [c for c in reader.fieldnames or [] if c not in CSV_COLUMNS]
    if unknown:
        return [], [f"line 1: unknown {'column' if len(unknown) == 1 else 'columns'} {', '.join(unknown)}"]
    rows: list[Row] = []
    for record in reader:
        row: dict = {}
        for column, value in record.items():
            value = value or ""
            if column in ("aliases", "roles"):
                items = [v.strip() for v in value.split(CSV_LIST_SEPARATOR) if v.strip()]
                if items:
                    row[column] = items
            elif column in ("category", "url"):
                if value.strip():
                    row[column] = value.strip()
            else:
                row[column] = value
        rows.append((reader.line_num, row))
    return rows, []


def read_rows(path: Path) -> tuple[list[Row], list[str]]:
    return rows_from_bytes(path.read_bytes(), path.name)


def rows_from_bytes(data: bytes, name: str) -> tuple[list[Row], list[str]]:
    """Parse a file's bytes (an uploaded one, or one read from disk): CSV when `name` ends in
    .csv, JSON Lines otherwise."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [], [f"not UTF-8 text ({exc.reason} at byte {exc.start})"]
    if name.lower().endswith(".csv"):
        return parse_catalog_csv(text)
    return parse_jsonl(text)


def fold_line_breaks(row: object) -> object:
    """The row with every run of tabs, CRs and LFs (and the spaces around it) in FOLDED_FIELDS
    made one space. Real query logs and spreadsheets carry them in one-line text (a bot's log:
    29 of 980 queries), and refusing the whole file over them helped nobody; ids, gold, roles
    and URLs are not folded (a line break there is a mistake to show), nor is any other control
    character (still refused by _schema_errors)."""
    if not isinstance(row, dict):
        return row

    def fold(value: object) -> object:
        if isinstance(value, str):
            return _LINE_BREAKS.sub(" ", value)
        if isinstance(value, list):
            return [_LINE_BREAKS.sub(" ", item) if isinstance(item, str) else item for item in value]
        return value
    return {key: fold(value) if key in FOLDED_FIELDS else value for key, value in row.items()}


def _schema_errors(validator: Draft202012Validator, lineno: int, row: object) -> list[str]:
    """The row's problems: first its text (catalog.validation: nesting, lone surrogates, control
    characters; line breaks only in MULTILINE_FIELDS), then the schema, then the task id and URL
    rules that other clients rely on."""
    bad_text = json_problem(row, MULTILINE_FIELDS)
    if bad_text is not None:
        where, problem = bad_text
        return [f"line {lineno}: field '{where.replace('[', '/').replace(']', '') or '(row)'}': {problem}"]
    found = []
    for error in sorted(validator.iter_errors(row), key=lambda e: list(e.path)):
        where = "/".join(str(p) for p in error.absolute_path) or "(row)"
        message = error.message if len(error.message) <= 300 else error.message[:300] + "..."
        found.append(f"line {lineno}: field '{where}': {message}")
    if found or validator is not _TASK_VALIDATOR:
        return found
    for field, problem in (("id", task_id_problem(row["id"])),
                           ("url", url_problem(row["url"]) if "url" in row else None)):
        if problem:
            found.append(f"line {lineno}: field '{field}': {problem}")
    return found


def validate_tasks(rows: Iterable[Row], source: str, parse_errors: list[str] = ()) -> list[TaskRecord]:
    """Every task of `rows`, or ImportRejected with every problem (and `parse_errors`): each row
    is checked against the task schema, and an id may stand on one line only."""
    def read(lineno: int, row: object) -> TaskRecord:
        row = fold_line_breaks(row)
        problems = _schema_errors(_TASK_VALIDATOR, lineno, row)
        if problems:
            raise RowRefused(*problems)
        return TaskRecord(
            id=row["id"], name=row["name"].strip(), help=row["help"].strip(),
            category=row.get("category") or None, aliases=tuple(row.get("aliases", ())),
            url=row.get("url") or None, roles=tuple(row.get("roles", ())),
            active=row.get("active", True),
        )

    tasks, problems = all_or_nothing(rows, read, key=lambda task: task.id, duplicate=lambda lineno, task, first: (
        f"line {lineno}: field 'id': duplicate id {task.id!r} (first on line {first})"))
    if parse_errors or problems:
        raise ImportRejected(source, [*parse_errors, *problems])
    return tasks


def validate_cases(rows: Iterable[Row], known_task_ids: set[str], source: str,
                   parse_errors: list[str] = ()) -> list[CaseRecord]:
    """Every test case of `rows`, or ImportRejected with every problem (and `parse_errors`):
    each row is checked against the case schema, its query must not be blank, its gold must name
    `known_task_ids`, and a query may stand on one line only."""
    def read(lineno: int, row: object) -> CaseRecord:
        row = fold_line_breaks(row)
        problems = _schema_errors(_CASE_VALIDATOR, lineno, row)
        if problems:
            raise RowRefused(*problems)
        query = row["query"].strip()
        if not query:
            raise RowRefused(f"line {lineno}: field 'query': must not be blank")
        unknown = [g for g in row["gold"] if g not in known_task_ids]
        if unknown:
            raise RowRefused(f"line {lineno}: field 'gold': unknown task {'id' if len(unknown) == 1 else 'ids'} "
                             f"{', '.join(map(repr, unknown))}")
        return CaseRecord(query=query, gold=tuple(row["gold"]), rationale=row.get("rationale", "").strip(),
                          category=row.get("category"))

    cases, problems = all_or_nothing(rows, read, key=lambda case: case.query, duplicate=lambda lineno, case, first: (
        f"line {lineno}: field 'query': duplicate query {case.query!r} (first on line {first})"))
    if parse_errors or problems:
        raise ImportRejected(source, [*parse_errors, *problems])
    return cases


def load_tasks_file(path: Path) -> list[TaskRecord]:
    return load_tasks_bytes(path.read_bytes(), path.name, str(path))


def load_cases_file(path: Path, known_task_ids: set[str]) -> list[CaseRecord]:
    return load_cases_bytes(path.read_bytes(), path.name, known_task_ids, str(path))


def load_tasks_bytes(data: bytes, name: str, source: str | None = None) -> list[TaskRecord]:
    """Tasks from a file's bytes (JSON Lines, or CSV when `name` ends in .csv); ImportRejected
    names every bad line and field. The CLI and the admin's upload page both come here."""
    rows, parse_errors = rows_from_bytes(data, name)
    return validate_tasks(rows, source or name, parse_errors)


def load_cases_bytes(data: bytes, name: str, known_task_ids: set[str], source: str | None = None) -> list[CaseRecord]:
    """Test cases from a JSON Lines file's bytes; gold ids must name `known_task_ids`."""
    rows, parse_errors = rows_from_bytes(data, name)
    if name.lower().endswith(".csv"):
        parse_errors = ["test cases are JSON Lines only (.jsonl)"]
    return validate_cases(rows, known_task_ids, source or name, parse_errors)


def jsonl_text(rows: Iterable[dict]) -> str:
    """Rows as JSON Lines (UTF-8 text, one object a line), as the export commands write them."""
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def write_jsonl(path: Path, rows: Iterable[dict]) -> int:
    rows = list(rows)
    path.write_text(jsonl_text(rows), encoding="utf-8")
    return len(rows)


def write_catalog(path: Path, tasks: Iterable[TaskRecord]) -> int:
    if path.suffix.lower() != ".csv":
        return write_jsonl(path, (t.to_row() for t in tasks))
    count = 0
    with path.open("w", encoding="utf-8", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for task in tasks:
            writer.writerow({"id": task.id, "name": task.name, "help": task.help,
                             "category": task.category or "",
                             "aliases": CSV_LIST_SEPARATOR.join(task.aliases),
                             "url": task.url or "", "roles": CSV_LIST_SEPARATOR.join(task.roles)})
            count += 1
    return count
