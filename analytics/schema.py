"""Validation of POST /api/events bodies against the schemas in openapi.json.

The request schema lives in one place, openapi.json (components.schemas.EventBatch and the four
event schemas, picked by Event's discriminator on `type`); this module validates with jsonschema
against exactly those, so the documentation and the check cannot drift apart. It validates in two
steps so that an error names the event: first the envelope (session_id, 1-50 events, each an
object with a known `type`), then each event against its own type's schema. The first problem
found is reported as `events[<index>].<field>: <what is wrong>`.
"""
from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from jsonschema import Draft202012Validator, validators as jsonschema_validators
from jsonschema.exceptions import ValidationError, best_match
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from analytics.records import EventRecord
from lexicon.text import normalise_query
from catalog.validation import json_problem, render_path
from settings import PROJECT_ROOT

SPEC_URI = "urn:taskfinder:openapi"
#: Largest request body accepted (bytes, before parsing).
MAX_BODY_BYTES = 16 * 1024
#: Longest excerpt of a jsonschema message echoed back (it may quote the offending value).
MAX_MESSAGE_CHARS = 200


class EventError(ValueError):
    """An events request that cannot be accepted; the message says which event and field."""


@dataclass(frozen=True)
class EventBatch:
    session_id: str | None
    events: tuple[EventRecord, ...]


def ecma_pattern(_validator, pattern: str, instance, _schema):
    """JSON Schema's `pattern` with ECMA-262's `$`: the end of the string, not also before a
    trailing newline as in Python's `re` (jsonschema's default would let "id\\n" through)."""
    if isinstance(instance, str) and not re.search(re.sub(r"(?<!\\)\$$", r"\\Z", pattern), instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


Validator = jsonschema_validators.extend(Draft202012Validator, {"pattern": ecma_pattern})


@dataclass(frozen=True)
class _Validators:
    envelope: Validator
    by_type: dict[str, Validator]


@lru_cache(maxsize=1)
def validators() -> _Validators:
    """jsonschema validators built from openapi.json (read once per process)."""
    spec = json.loads((PROJECT_ROOT / "openapi.json").read_text(encoding="utf-8"))
    registry = Registry().with_resource(SPEC_URI, Resource(contents=spec, specification=DRAFT202012))

    def validator(schema: dict) -> Validator:
        return Validator(schema, registry=registry)

    schemas = spec["components"]["schemas"]
    mapping = schemas["Event"]["discriminator"]["mapping"]
    envelope = copy.deepcopy(schemas["EventBatch"])
    envelope["properties"]["session_id"] = {"$ref": SPEC_URI + "#/components/schemas/SessionId"}
    envelope["properties"]["events"]["items"] = {"type": "object", "required": ["type"],
                                                 "properties": {"type": {"enum": list(mapping)}}}
    return _Validators(envelope=validator(envelope),
                       by_type={kind: validator({"$ref": SPEC_URI + ref}) for kind, ref in mapping.items()})


def event_types() -> tuple[str, ...]:
    return tuple(validators().by_type)


def _field_and_problem(error: ValidationError, prefix: list, kind: str | None) -> tuple[str, str]:
    """The field an error is about (its path after `prefix`) and a short description of the problem."""
    path = [*prefix, *error.absolute_path]
    if kind:
        what = f"a {kind} event"
    else:
        what = "an event" if len(path) == 2 and path[0] == "events" else "the request"
    if error.validator == "required":
        missing = next(p for p in error.validator_value if p not in error.instance)
        return render_path([*path, missing]), f"is required in {what}"
    if error.validator == "additionalProperties":
        allowed = set(error.schema.get("properties", {}))
        extra = sorted(p for p in error.instance if p not in allowed)[0]
        return render_path([*path, extra[:MAX_MESSAGE_CHARS]]), f"is not a field of {what}"
    if error.validator == "enum" and path[-1:] == ["type"]:
        return render_path(path), f"must be one of {', '.join(event_types())}"
    if error.validator in ("maxItems", "minItems"):
        bound = "at most" if error.validator == "maxItems" else "at least"
        return render_path(path), f"has {len(error.instance)} items; {bound} {error.validator_value} allowed"
    if error.validator in ("maxLength", "minLength"):
        bound = "at most" if error.validator == "maxLength" else "at least"
        return render_path(path), f"has {len(error.instance)} characters; {bound} {error.validator_value} allowed"
    message = error.message if len(error.message) <= MAX_MESSAGE_CHARS else error.message[:MAX_MESSAGE_CHARS] + "..."
    return render_path(path), message


def _first_error(validator: Validator, instance) -> ValidationError | None:
    """The most relevant error (jsonschema's best_match: the one highest in the document)."""
    return best_match(validator.iter_errors(instance))


def parse_batch(payload, received_at: datetime) -> EventBatch:
    """The validated batch as EventRecords stamped `received_at`, or EventError naming the first
    bad event index and field (`events[3].position: 0 is less than the minimum of 1`). Every
    string is first checked by catalog.validation (no lone surrogate, no control character)."""
    found = validators()
    error = _first_error(found.envelope, payload)
    if error is not None:
        field, problem = _field_and_problem(error, [], None)
        raise EventError(f"{field}: {problem}" if field else f"the body {problem}")
    session_id = payload.get("session_id")
    events = []
    for index, event in enumerate(payload["events"]):
        kind = event["type"]
        error = _first_error(found.by_type[kind], event)
        if error is not None:
            field, problem = _field_and_problem(error, ["events", index], kind)
            raise EventError(f"{field}: {problem}")
        bad_text = json_problem(event, path=("events", index))   # a lone surrogate would reach the writer
        if bad_text is not None:
            raise EventError("{}: {}".format(*bad_text))
        events.append(to_record(event, session_id, received_at))
    return EventBatch(session_id, tuple(events))


def to_record(event: dict, session_id: str | None, received_at: datetime) -> EventRecord:
    """A validated event as stored: the impression's query normalised, numbers as integers."""
    task_ids = event.get("task_ids")
    return EventRecord(
        at=received_at, search_id=event["search_id"], type=event["type"], session_id=session_id,
        task_id=event.get("task_id"),
        position=int(event["position"]) if "position" in event else None,
        dwell_ms=int(event["dwell_ms"]) if "dwell_ms" in event else None,
        query=normalise_query(event["query"]) if "query" in event else None,
        task_ids=tuple(task_ids) if task_ids is not None else None)
