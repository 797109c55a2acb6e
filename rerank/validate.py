"""The hard safety boundary: nothing outside the shortlist survives this module.

Every answer is checked here in code, entry by entry, even when the server promised
constrained decoding (a proxy may drop `response_format`, a server may ignore `strict`).
An entry is dropped, and counted under one reason, when it fails the first of these checks:

    wrong_shape       not an object, or idx not an integer, or task_name not a string
                      (rank/reason, when present, must be an integer/string)
    idx_out_of_range  idx is not an index of the shortlist
    name_mismatch     task_name (stripped) is the name of a *different* shortlist entry
    unknown_name      task_name (stripped) is the name of no shortlist entry (hallucination)
    duplicate         idx was already accepted earlier in the answer

Whole-answer failures make the answer unusable and are counted once:

    malformed_json    the content is not JSON (e.g. truncated by max_tokens)
    wrong_shape       JSON, but neither {"results": [...]} nor a bare array

The answer is usable when it is well-formed and either empty ("no shortlist entry fits", a
legitimate answer) or keeps at least one entry; an answer whose entries were all dropped is not.

An accepted entry's `reason` is model text shown to users and logged: it is cut to one line of
at most REASON_LIMIT characters with control and format characters removed (`clean_reason`).
"""
from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Sequence

from .records import Candidate
from .schema import ANSWER_SHAPE, ENTRY_SHAPE

MALFORMED_JSON = "malformed_json"
WRONG_SHAPE = "wrong_shape"
IDX_OUT_OF_RANGE = "idx_out_of_range"
NAME_MISMATCH = "name_mismatch"
UNKNOWN_NAME = "unknown_name"
DUPLICATE = "duplicate"


@cache
def validators():
    """(the answer's validator, an entry's), made on the first LLM answer: jsonschema is ~0.04 s
    of imports that a command or a worker never re-ranking (`app.py search`) does not need."""
    from jsonschema import Draft202012Validator
    return Draft202012Validator(ANSWER_SHAPE), Draft202012Validator(ENTRY_SHAPE)


#: The longest `reason` passed on. The prompt asks for ~12 words and grammar servers get
#: maxLength 80 (schema.REASON_MAX_CHARS), but strict-schema servers and unconstrained models
#: are bounded only by the completion budget: a reason could otherwise be kilobytes long.
REASON_LIMIT = 200
# Unconstrained models like to wrap JSON in a Markdown fence; the fence carries no meaning.
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL | re.IGNORECASE)


@dataclass
class Verdict:
    """The validated entries, in answer order, and what was dropped on the way."""

    accepted: list[tuple[int, str]] = field(default_factory=list)  # (idx, reason)
    dropped: Counter[str] = field(default_factory=Counter)
    usable: bool = True


def check_answer(content: str | None, candidates: Sequence[Candidate]) -> Verdict:
    """Parse and validate one LLM answer against the shortlist it was asked about."""
    text = (content or "").strip()
    if fenced := _FENCE.match(text):
        text = fenced.group(1)
    try:
        answer = json.loads(text)
    except ValueError:
        return Verdict(dropped=Counter({MALFORMED_JSON: 1}), usable=False)
    if not validators()[0].is_valid(answer):
        return Verdict(dropped=Counter({WRONG_SHAPE: 1}), usable=False)
    entries = answer if isinstance(answer, list) else answer["results"]

    by_idx = {c.idx: c.name.strip() for c in candidates}
    names = set(by_idx.values())
    verdict = Verdict()
    seen: set[int] = set()
    for entry in entries:
        if problem := _entry_problem(entry, by_idx, names, seen):
            verdict.dropped[problem] += 1
        else:
            seen.add(entry["idx"])
            verdict.accepted.append((entry["idx"], clean_reason(entry.get("reason", ""))))
    verdict.usable = bool(verdict.accepted) or not entries
    return verdict


def clean_reason(reason: str) -> str:
    """One line, no control or format characters (newlines, escapes, bidi overrides, zero-width
    characters), whitespace collapsed, at most REASON_LIMIT characters (cut with an ellipsis)."""
    kept = "".join(" " if ch.isspace() else ch for ch in reason
                   if ch.isspace() or unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Co", "Cn"))
    line = " ".join(kept.split())
    return line if len(line) <= REASON_LIMIT else line[: REASON_LIMIT - 1].rstrip() + "…"


def _entry_problem(entry: Any, by_idx: dict[int, str], names: set[str], seen: set[int]) -> str | None:
    # jsonschema's "integer" also admits 1.0, which cannot index a list: demand a real int.
    if not validators()[1].is_valid(entry) or type(entry["idx"]) is not int:
        return WRONG_SHAPE
    idx, name = entry["idx"], entry["task_name"].strip()
    if idx not in by_idx:
        return IDX_OUT_OF_RANGE
    if name != by_idx[idx]:
        return NAME_MISMATCH if name in names else UNKNOWN_NAME
    if idx in seen:
        return DUPLICATE
    return None
