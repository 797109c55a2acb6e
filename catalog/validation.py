"""The one check of untrusted text and numbers, used at every edge: POST /api/events, the
search API's query, catalog imports and the admin editor (through catalog.formats), admin
routes and their JSON bodies.

Why it exists (issue 17): a JSON string may hold a lone surrogate (`"\\ud800"`), which Python
accepts as text but no database driver can encode (UTF-8 has no form for it); PostgreSQL
refuses NUL in text while SQLite stores it; and Python's `int()` takes numbers far beyond the
64 bits a database column holds (OverflowError deep in a driver). Each is refused here, at the
edge, with a message naming the field, so nothing malformed ever reaches a writer or a query.

Issue 33 closed the last gaps: the id and version columns are 32-bit INTEGERs (PostgreSQL
answered `integer out of range` to an id of 2**31), so ids and versions are bounded by MAX_ID;
a lone surrogate as a JSON object *key* was echoed in the 400's message, which then could not
be encoded (a 500), so every JSON body and imported line is decoded by `decode_json`, which
refuses lone surrogates anywhere and names where without echoing them; task ids "." and ".."
are refused like '/', being path segments a browser resolves away.
"""
from __future__ import annotations

import json
import re
from typing import Iterator
from urllib.parse import urlsplit

#: Largest integer an offset holds (signed 64 bits: LIMIT/OFFSET take a bigint).
MAX_INT64 = 2**63 - 1
#: Largest id or record version: their columns are INTEGER, 32 bits on PostgreSQL
#: (catalog.models, admin.models, evaluation.models). web.flask_app.Int32Converter bounds route ids by it.
MAX_ID = 2**31 - 1
#: Deepest nesting of arrays/objects accepted in a JSON body or an imported row.
MAX_JSON_DEPTH = 32

# C0 and C1 control characters and DEL, lone surrogates. Tab, line feed and carriage return are
# allowed only in multi-line fields (help text, rationale).
_BAD_SINGLE_LINE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_BAD_MULTI_LINE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")
URL_SCHEMES = ("http", "https")


def text_problem(value: str, multiline: bool = False) -> str | None:
    """What is wrong with `value` as stored text, or None: a lone surrogate (not Unicode; no
    database can store it) or a control character (NUL: PostgreSQL refuses it)."""
    found = (_BAD_MULTI_LINE if multiline else _BAD_SINGLE_LINE).search(value)
    return None if found is None else _described(found)


def _described(found: re.Match) -> str:
    """A bad character found in a text, in words: which kind, which code point, where."""
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
    """("events", 3, "task_ids", 1) -> "events[3].task_ids[1]". A key's lone surrogates and
    control characters are written as escapes (`\\ud800`): the path goes into an error message,
    which must itself be encodable text."""
    text = ""
    for part in parts:
        part = part if isinstance(part, int) else printable(str(part))
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def printable(value: str) -> str:
    """`value` with each lone surrogate or control character written as a `\\uXXXX` escape."""
    return _BAD_SINGLE_LINE.sub(lambda found: f"\\u{ord(found.group()):04x}", value)


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


class JSONRefused(ValueError):
    """JSON text that parses but is refused by `decode_json`: `field` is where (render_path's
    form, "" for the whole value), `problem` what is wrong there."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"{field}: {problem}" if field else problem)
        self.field, self.problem = field, problem


def decode_json(text: str | bytes) -> object:
    """The one decoding step of JSON the app is sent (request bodies, imported lines): the
    standard library's parser, then a refusal (JSONRefused, a ValueError) of a lone surrogate
    anywhere, object keys included, at any depth. A surrogate never leaves this function, so no
    later message or writer meets text it cannot encode; deep nesting and control characters
    are json_problem's to judge, per field. Invalid JSON raises a plain ValueError: the parser's
    JSONDecodeError, or one for nesting too deep for the parser itself (its RecursionError would
    be a 500)."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply to parse") from None
    found = _first_lone_surrogate(value)
    if found is not None:
        path, match = found
        raise JSONRefused(render_path(path), _described(match))
    return value


def _first_lone_surrogate(value: object) -> tuple[tuple, re.Match] | None:
    """(path, match) of the first lone surrogate in a parsed JSON value, keys included, in
    document order. A loop, not recursion: the parser accepts deeper nesting than Python's
    recursion limit allows a walk."""
    pending: list[tuple[tuple, object]] = [((), value)]
    while pending:
        path, item = pending.pop()
        if isinstance(item, str):
            found = _LONE_SURROGATE.search(item)
            if found:
                return path, found
        elif isinstance(item, dict):   # each key is looked at (as a string) before its value
            for key, child in reversed(item.items()):
                pending += [((*path, key), child), ((*path, key), key)]
        elif isinstance(item, list):
            pending.extend(((*path, index), child) for index, child in reversed(list(enumerate(item))))
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


def bounded_id(raw: object) -> int | None:
    """`raw` as a record id or version (bounded_int up to MAX_ID, what their 32-bit columns
    hold), or None."""
    return bounded_int(raw, 0, MAX_ID)


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


#: Path segments that browsers and URL libraries resolve away ("/admin/tasks/.." is /admin/).
DOT_SEGMENTS = frozenset({".", ".."})


def task_id_problem(task_id: str) -> str | None:
    """The one rule for a task id, at import, in the editor and in the admin's addresses: it is
    one path segment of the editor's URLs (/admin/tasks/<id>), so no control character (NUL:
    PostgreSQL refuses it), no lone surrogate, no '/', and not "." or ".."."""
    problem = text_problem(task_id)
    if problem:
        return problem
    if "/" in task_id:
        return "must not contain '/' (it is part of the task's address in the editor)"
    if task_id in DOT_SEGMENTS:
        return "must not be '.' or '..' (browsers resolve it away in the task's address in the editor)"
    return None
