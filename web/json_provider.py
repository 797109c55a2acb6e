"""Flask's JSON through orjson: the app's responses encoded in C.

A search answer is a few kilobytes of nested dicts (every result with its signals, contributions
and matched terms); the standard library's encoder spends about a third of a millisecond on one,
a large share of a cached type-ahead answer's whole cost (docs/design/performance.md). orjson encodes
it about ten times faster. Anything orjson cannot encode by itself goes through Flask's own
`default` (dates, UUIDs, Decimals, `__html__`), and anything still refused (an integer wider than
64 bits) falls back to the standard library, so no response changes meaning. Differences from
Flask's default output, all still valid JSON: non-ASCII text is written as UTF-8 rather than
\\u-escaped, there is no space after separators, and NaN is written as null rather than as the
invalid `NaN`.
"""
from __future__ import annotations

from typing import Any

from flask.json.provider import DefaultJSONProvider

from catalog.validation import decode_json
from infra.json_bytes import encode_json


class OrjsonProvider(DefaultJSONProvider):
    def encode(self, obj: Any) -> bytes:
        """`obj` as UTF-8 JSON bytes (keys in insertion order unless `sort_keys`)."""
        return encode_json(obj, default=self.default, sort_keys=self.sort_keys)

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        """Request bodies through the app's one JSON decoding step (catalog.validation.decode_json):
        a body nested too deeply (a RecursionError, issue 17) or holding a lone surrogate, even
        as an object key (issue 33), is a ValueError, which `request.get_json(silent=True)` turns
        into None and the views into a 400, never a 500."""
        if kwargs:   # explicit standard-library options: the parser as asked, guarded the same
            try:
                return super().loads(s, **kwargs)
            except RecursionError:
                raise ValueError("nested too deeply to parse") from None
        return decode_json(s)

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        if kwargs:  # explicit standard-library options (indent, separators...): honour them
            return super().dumps(obj, **kwargs)
        return self.encode(obj).decode()

    def response(self, *args: Any, **kwargs: Any):
        if self.compact is False or (self.compact is None and self._app.debug):
            return super().response(*args, **kwargs)  # pretty-printed, for debugging
        body = self.encode(self._prepare_response_obj(args, kwargs))
        return self._app.response_class(body + b"\n", mimetype=self.mimetype)
