"""Write the `Signals` schema of openapi.json (each result's `signals`) from the signal registry.

The public spec is a file (served as written, checked by schemathesis in tests/test_api_contract.py);
the part of it that lists the ranking signals is generated from search/signal/, so a new signal
is in the spec once it is registered:

    python ops/gen_openapi_signals.py           # rewrite openapi.json's Signals schema in place
    python ops/gen_openapi_signals.py --check   # exit 1 when it is stale (tests/test_docs.py)
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from search.signal import REGISTRY  # noqa: E402

SPEC = Path(__file__).resolve().parents[1] / "openapi.json"
ALWAYS = ("sparse", "dense")   # present in every result (null when unavailable); the others only when computed
NOTES = {"typing": "present only when the query is read as unfinished",
         "learned": "present only once a fit used evidence learned from use"}


def signals_schema() -> dict:
    properties = {}
    for signal in REGISTRY:
        note = NOTES.get(signal.family)
        properties[signal.name] = {"type": ["number", "null"],
                                   "description": signal.source + (f" ({note})" if note else "")}
    return {
        "type": "object",
        "description": "Each signal's raw value for this task (search/signal/); null when unavailable (embeddings "
                       "down; prototype without a per-catalog fit). Sparse signals are coverage-normalised to [0, ~1]; "
                       "embedding, centroid, neighbour are raw cosines; prototype is a logit.",
        "required": [s.name for s in REGISTRY if s.family in ALWAYS],
        "additionalProperties": False,
        "properties": properties,
    }


def rendered() -> str:
    spec = json.loads(SPEC.read_text(encoding="utf-8"))
    spec["components"]["schemas"]["Signals"] = signals_schema()
    return json.dumps(spec, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when openapi.json's Signals schema is stale")
    args = parser.parse_args(argv)
    text = rendered()
    if args.check:
        if SPEC.read_text(encoding="utf-8") != text:
            print(f"{SPEC} is stale: run python ops/gen_openapi_signals.py", file=sys.stderr)
            return 1
        return 0
    SPEC.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
