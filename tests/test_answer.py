"""serving.answer.Answer: the response split into the ranking's body (shared, encoded once when
cached) and per-response fields, and the JSON it writes."""
import json

import pytest

from serving.answer import Answer
from tests.test_answer_cache import make_service


def test_to_json_is_the_body_then_the_per_response_fields():
    answer = Answer({"query": "bus", "results": [{"id": "a", "score": 0.5}], "note": "ünïcode"}, {"total": 1.25})
    document = json.loads(answer.to_json(search_id="abc", access={"credential": "none"}))
    assert document == {**answer.as_dict(), "search_id": "abc", "access": {"credential": "none"}}
    assert list(document) == ["query", "results", "note", "timings_ms", "search_id", "access"]


def test_an_encoded_answer_writes_the_same_json_as_a_fresh_one():
    fresh = Answer({"query": "bus", "k": 3, "results": []}, {"total": 2.0})
    encoded = fresh.with_encoding()
    assert encoded.encoded is not None and encoded.with_encoding() is encoded
    assert encoded.to_json(search_id="x") == fresh.to_json(search_id="x")


@pytest.mark.parametrize("extra", [{"query": "again"}, {"timings_ms": {}}])
def test_a_field_already_in_the_answer_is_refused_not_duplicated(extra):
    with pytest.raises(ValueError):
        Answer({"query": "bus"}, {"total": 1.0}).to_json(**extra)


def test_timings_cannot_hide_in_the_shared_body():
    with pytest.raises(ValueError):
        Answer({"query": "bus", "timings_ms": {}}, {})


def test_a_cached_answer_replays_its_encoding_with_its_own_timings(settings):
    service = make_service(settings)
    first = service.answer("bus routes", k=3)
    second = service.answer("bus routes", k=3)
    third = service.answer("bus routes", k=3)
    assert first.encoded is not None and second.encoded is first.encoded and third.encoded is first.encoded
    assert second.body is first.body
    assert second.timings_ms is not third.timings_ms and second.timings_ms["prefilter"] == 0.0
    one, two = json.loads(first.to_json(search_id="1")), json.loads(second.to_json(search_id="2"))
    assert {k: v for k, v in one.items() if k not in ("timings_ms", "search_id")} == \
           {k: v for k, v in two.items() if k not in ("timings_ms", "search_id")}
    as_dict = service.search("bus routes", k=3)   # the CLI's and admin's form: the same response, one dict
    assert {k: v for k, v in as_dict.items() if k != "timings_ms"} == dict(first.body)
    assert set(as_dict["timings_ms"]) == set(second.timings_ms)
