"""The JSON output contract, built per request from the shortlist.

The request schema pins `idx` and `task_name` to enums of the shortlist, so servers that do
constrained decoding (OpenAI structured outputs, vLLM, llama.cpp grammars) cannot even emit an
entry outside it; `maxItems` caps the answer at the shortlist size. It follows the OpenAI
"strict" subset: every property required, `additionalProperties: false`, an object at the top.

The *shape* schemas below carry no enums: the response is checked against them with
`jsonschema` to diagnose malformed entries, while membership (idx in the shortlist, name equal
to the name at idx) is checked in code by `validate.py`, entry by entry, whatever the server
claims to have enforced.
"""
from __future__ import annotations

import copy
from typing import Any, Sequence

from .records import Candidate

SCHEMA_NAME = "task_rerank"

#: Grammar-constrained servers (the json_object+schema rung) also get `maxLength` on the reason,
#: which OpenAI strict mode would reject: small local models otherwise write long reasons and
#: run out of completion budget mid-answer. ~80 characters is the "at most 12 words" asked for.
REASON_MAX_CHARS = 80

_ENTRY_PROPERTIES: dict[str, dict[str, Any]] = {
    "rank": {"type": "integer"},
    "idx": {"type": "integer"},
    "task_name": {"type": "string"},
    "reason": {"type": "string"},
}

#: One answer entry. `rank` and `reason` are requested but optional here: they are not needed
#: for safety, and dropping an otherwise correct entry of an unconstrained model for a missing
#: reason would only lose a good ranking. Extra keys are ignored.
ENTRY_SHAPE: dict[str, Any] = {
    "type": "object",
    "properties": _ENTRY_PROPERTIES,
    "required": ["idx", "task_name"],
}

#: The whole answer: {"results": [...]} or, from models that ignore the envelope, a bare array.
ANSWER_SHAPE: dict[str, Any] = {
    "anyOf": [
        {"type": "array"},
        {"type": "object", "properties": {"results": {"type": "array"}}, "required": ["results"]},
    ]
}


def response_schema(candidates: Sequence[Candidate]) -> dict[str, Any]:
    """The strict request schema for this shortlist: one `anyOf` branch per entry, each pinning
    `idx` and `task_name` to that entry's pair, and maxItems = the shortlist size.

    Separate idx and name enums let a constrained model pair a valid name with the wrong index:
    Gemma 3 270M did so for 45% of its entries (all dropped as name_mismatch). Binding the pair
    in the schema makes that impossible wherever the server enforces the schema.
    """
    return {
        "type": "object",
        "properties": {"results": {"type": "array", "items": {"anyOf": [_entry_for(c) for c in candidates]},
                                   "maxItems": len(candidates)}},
        "required": ["results"],
        "additionalProperties": False,
    }


def _entry_for(candidate: Candidate) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            **_ENTRY_PROPERTIES,
            "idx": {"type": "integer", "enum": [candidate.idx]},
            "task_name": {"type": "string", "enum": [candidate.name]},
        },
        "required": list(_ENTRY_PROPERTIES),
        "additionalProperties": False,
    }


def entry_branches(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The per-entry branches of a response schema."""
    return schema["properties"]["results"]["items"]["anyOf"]


def grammar_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema for grammar-constrained servers (the json_object+schema rung): a copy of the
    strict request schema with `maxLength` on the reason, which OpenAI strict mode would reject."""
    bounded = copy.deepcopy(schema)
    for branch in entry_branches(bounded):
        branch["properties"]["reason"]["maxLength"] = REASON_MAX_CHARS
    return bounded
