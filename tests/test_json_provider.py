"""The app's JSON encoder (web.json_provider.OrjsonProvider): the same documents as Flask's
standard-library encoder, faster; what orjson cannot encode falls back instead of failing."""
import dataclasses
import datetime
import json
import uuid
from decimal import Decimal

import numpy as np
from flask import Flask, jsonify

from web.json_provider import OrjsonProvider


def app_with_provider(sort_keys: bool = False) -> Flask:
    app = Flask(__name__)
    app.json = OrjsonProvider(app)
    app.json.sort_keys = sort_keys
    return app


@dataclasses.dataclass
class Point:
    x: int
    y: float


def test_search_answers_decode_to_what_the_standard_encoder_writes(client):
    body = client.get("/api/search", query_string={"q": "hearing and vision screening", "k": 5})
    assert body.status_code == 200 and body.mimetype == "application/json"
    document = body.get_json()
    assert json.loads(json.dumps(document)) == document  # round-trips through the standard library
    assert list(document)[:3] == ["query", "k", "role"]  # insertion order kept (sort_keys off)


def test_values_beyond_plain_json_are_encoded_like_flask_does():
    app = app_with_provider()
    value = {"when": datetime.date(2024, 5, 1), "id": uuid.UUID(int=1), "amount": Decimal("1.50"),
             "point": Point(1, 2.5), 3: "int key", "big": 2 ** 70, "text": "café ✓", "f64": np.float64(0.25)}
    with app.app_context():
        ours = json.loads(jsonify(value).get_data())
    reference = Flask(__name__)
    reference.json.sort_keys = False
    with reference.app_context():
        standard = json.loads(jsonify(value).get_data())
    assert ours == standard
    assert ours["big"] == 2 ** 70 and ours["3"] == "int key" and ours["text"] == "café ✓"


def test_sort_keys_and_explicit_options_are_honoured():
    app = app_with_provider(sort_keys=True)
    with app.app_context():
        assert app.json.dumps({"b": 1, "a": 2}) == '{"a":2,"b":1}'
        assert app.json.dumps({"b": 1}, indent=2) == '{\n  "b": 1\n}'
