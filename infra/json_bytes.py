"""JSON as bytes through orjson: the one encoder of search answers (serving.answer) and of every
Flask response (web.json_provider). No Flask here, so the services below the web layer use it too.
"""
from __future__ import annotations

import json
from typing import Any, Callable

import orjson


def encode_json(obj: Any, default: Callable[[Any], Any] | None = None, sort_keys: bool = False) -> bytes:
    """`obj` as compact UTF-8 JSON bytes, keys in insertion order unless `sort_keys`; values
    orjson cannot encode go through `default`, and anything it still refuses (an integer wider
    than 64 bits) through the standard library."""
    option = orjson.OPT_NON_STR_KEYS | (orjson.OPT_SORT_KEYS if sort_keys else 0)
    try:
        return orjson.dumps(obj, default=default, option=option)
    except orjson.JSONEncodeError:
        return json.dumps(obj, default=default, sort_keys=sort_keys, ensure_ascii=False,
                          separators=(",", ":")).encode()
