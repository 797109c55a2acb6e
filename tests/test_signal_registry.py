"""One module per signal, registered once, read everywhere (issue 35 item 2).

Every place that names the ranking signals reads the registry (search/signal/): the prefilter's
families, the fusion weights' fields, the abstention's evidence, the evaluation's single-signal
baselines and pooled defaults, the configuration reference, the public spec's `Signals` schema,
and the "why" line's phrases, which the API now sends with each result instead of the widget
holding its own copy."""
from __future__ import annotations

from dataclasses import fields

import ops.gen_openapi_signals as spec
import search.confidence as confidence
import search.prefilter as prefilter
from evaluation.configs import BASELINES, config_specs
from evaluation.defaults import POOL_SIGNALS
from ops.gen_config_doc import render
from search.signal import BY_NAME, FAMILIES, REGISTRY, phrases
from settings import PROJECT_ROOT, DegradedWeights, Weights


def test_every_signal_is_registered_once_and_every_list_of_signals_is_the_registrys():
    names = [s.name for s in REGISTRY]
    assert len(names) == len(set(names)) == len(BY_NAME)
    assert all(s.family in FAMILIES for s in REGISTRY)
    assert {f.name for f in fields(Weights)} == {f.name for f in fields(DegradedWeights)} == set(names)
    assert prefilter.FUSED == tuple(names[:8]) + ("typed", "begins", "learned") and set(prefilter.FUSED) == set(names)
    assert set(confidence.SPARSE_EVIDENCE + confidence.TYPING_EVIDENCE) == {s.name for s in REGISTRY if s.abstention_evidence}
    assert BASELINES[1:] == tuple(s.name for s in REGISTRY if s.baseline)
    specs = config_specs(Weights())
    assert all(specs[s.name].description == s.baseline for s in REGISTRY if s.baseline)
    assert set(POOL_SIGNALS["full"]) == {s.name for s in REGISTRY if s.family in ("sparse", "dense") and not s.fit_only}
    reference = render()
    for signal in REGISTRY:
        assert f"| `WEIGHT_{signal.name.upper()}` |" in reference and signal.source.replace("|", "\\|") in reference
    assert spec.main(["--check"]) == 0, "openapi.json's Signals schema is stale: run python ops/gen_openapi_signals.py"
    assert list(spec.signals_schema()["properties"]) == names


def test_the_why_phrases_are_the_registrys_and_only_for_what_added_to_the_score(client):
    said = phrases()
    body = client.get("/api/search", query_string={"q": "hearing and vision screening", "k": 5}).get_json()
    assert body["results"]
    for row in body["results"]:
        for name, phrase in row["signal_phrases"].items():
            assert said[name] == phrase and row["contributions"][name] > 0
        assert set(row["signal_phrases"]) == {n for n, added in row["contributions"].items() if added > 0 and n in said}
    widget = (PROJECT_ROOT / "widget" / "static" / "widget.js").read_text(encoding="utf-8")
    assert not any(phrase in widget for phrase in said.values()), "the widget keeps no copy of a signal's phrase"
