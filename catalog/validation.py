"""The one check of untrusted text and numbers, used at every edge: POST /api/events, the
search API's query, catalog imports and the admin editor (through catalog.formats), admin
routes and their JSON bodies.

Why it exists (issue 17): a JSON string may hold a lone surrogate (`"\\ud800"`), which Python
accepts as text but no database driver can encode (UTF-8 has no form for it); PostgreSQL
refuses NUL in text while SQLite stores it; and Python's `int()` takes numbers far beyond the
64 bits a database column holds (OverflowError deep in a driver). Each is refused here, at the
edge, with a message naming the field, so nothing malformed ever reaches a writer or a query.
"""
from __future__ import annotations

import re
from typing import Iterator
from urllib.parse import urlsplit

#: Largest integer a database id, version or offset column holds (signed 64 bits).
MAX_INT64 = 2**63 - 1
#: Deepest nesting of arrays/objects accepted in a JSON body or an imported row.
MAX_JSON_DEPTH = 32

# C0 and C1 control characters and DEL, lone surrogates. Tab, line feed and carriage return are
# allowed only in multi-line fields (help text, rationale).
_BAD_SINGLE_LINE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_BAD_MULTI_LINE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
URL_SCHEMES = ("http", "https")


def text_problem(value: str, multiline: bool = False) -> str | None:
    """What is wrong with `value` as stored text, or None: a lone surrogate (not Unicode; no
    database can store it) or a control character (NUL: PostgreSQL refuses it)."""
    found = (_BAD_MULTI_LINE if multiline else _BAD_SINGLE_LINE).search(value)
    if found is None:
        return None
    char = found.group()
    kind = "a lone surrogate (not valid Unicode)" if "\ud800" <= char <= "\udfff" else "a control character"
    return f"contains {kind}, U+{ord(char):04X}, at character {found.start() + 1}"


def walk_strings(value: object, path: tuple = (), depth: int = 0) -> Iterator[tuple[tuple, object]]:
    """(path, value) for every string and every dict key in a parsed JSON value; a value nested
    deeper than MAX_JSON_DEPTH is yielded as (path, DeepNesting)."""
    if depth > MAX_JSON_DEPTH:
        yield path, DeepNesting
        return
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str):
                yield (*path, key), key
            yield from walk_strings(item, (*path, key), depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from walk_strings(item, (*path, index), depth + 1)


class DeepNesting:
    """Marker of walk_strings: a value nested deeper than MAX_JSON_DEPTH."""


def render_path(parts: tuple) -> str:
    """("events", 3, "task_ids", 1) -> "events[3].task_ids[1]"."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def json_problem(value: object, multiline_fields: frozenset[str] = frozenset(),
                 path: tuple = ()) -> tuple[str, str] | None:
    """The first (field path, problem) of a parsed JSON value found at `path`: too deeply nested,
    or a string with a lone surrogate or a control character (line breaks allowed in
    `multiline_fields`)."""
    for path, item in walk_strings(value, path):
        if item is DeepNesting:
            return render_path(path), f"is nested deeper than {MAX_JSON_DEPTH} levels"
        last = path[-1] if path else None
        parent = next((p for p in reversed(path) if isinstance(p, str)), None)
        problem = text_problem(item, multiline=parent in multiline_fields or last in multiline_fields)
        if problem:
            return render_path(path), problem
    return None


def bounded_int(raw: object, minimum: int = 0, maximum: int = MAX_INT64) -> int | None:
    """`raw` (a form field, a query parameter, a JSON value) as an int in [minimum, maximum],
    or None: ASCII digits only (str.isdigit accepts '²', which int() refuses), no bool."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        value = raw
    else:
        text = str(raw).strip()
        if not (text.isascii() and text.isdigit()) or len(text) > 19:
            return None
        value = int(text)
    return value if minimum <= value <= maximum else None


def url_problem(url: str) -> str | None:
    """What is wrong with a task URL that browsers and other clients will follow, or None: only
    http(s) URLs with a host and relative references (no scheme) are accepted, never
    `javascript:`, `data:` or any other scheme."""
    problem = text_problem(url)
    if problem:
        return problem
    if url != url.strip():
        return "must not start or end with white space"
    parts = urlsplit(url)
    if parts.scheme and parts.scheme.lower() not in URL_SCHEMES:
        return f"scheme {parts.scheme + ':'!r} is not allowed; use an http(s) URL or a relative path"
    if parts.scheme and not parts.netloc:
        return "an http(s) URL needs a host (http://host/path)"
    return None


def task_id_problem(task_id: str) -> str | None:
    """A task id is one path segment of the editor's URLs (/admin/tasks/<id>): no '/'."""
    problem = text_problem(task_id)
    if problem:
        return problem
    if "/" in task_id:
        return "must not contain '/' (it is part of the task's address in the editor)"
    return None
