"""One module per signal, registered once, read everywhere (issue 35 item 2).

Every place that names the ranking signals reads the registry (search/signal/): the prefilter's
families, the fusion weights' fields, the abstention's evidence, the evaluation's single-signal
baselines and pooled defaults, the configuration reference, the public spec's `Signals` schema,
and the "why" line's phrases, which the API now sends with each result instead of the widget
holding its own copy. What a signal tells the abstention it declares too (issue 45): the
abstention's features are the registry's."""
from __future__ import annotations

from dataclasses import fields, replace

import numpy as np
import pytest

import ops.gen_openapi_signals as spec
import search.confidence as confidence
import search.prefilter as prefilter
from catalog.demo import DEMO_FIT, DEMO_VECTORS
from evaluation.configs import BASELINES, config_specs
from evaluation.defaults import POOL_SIGNALS
from lexicon.rationale import build_lexicon
from ops.gen_config_doc import render
from search.confidence import AbstentionModel, answer_features, features_for_mode
from search.index import build_index
from search.shipped import ShippedFit
from search.signal import BY_NAME, FAMILIES, REGISTRY, AbstentionFeature, phrases
from settings import PROJECT_ROOT, DegradedWeights, FieldWeights, Weights
from tests.test_prefilter import CASES, TASKS, with_unit_vectors


def test_every_signal_is_registered_once_and_every_list_of_signals_is_the_registrys():
    names = [s.name for s in REGISTRY]
    assert len(names) == len(set(names)) == len(BY_NAME)
    assert all(s.family in FAMILIES for s in REGISTRY)
    assert {f.name for f in fields(Weights)} == {f.name for f in fields(DegradedWeights)} == set(names)
    fused_order = ("sparse", "dense", "typing", "learned")   # the fusion's order: the ranking signals, then the rest
    assert prefilter.FUSED == tuple(s.name for f in fused_order for s in REGISTRY if s.family == f)
    assert set(prefilter.FUSED) == set(names) and prefilter.FUSED[-3:] == ("typed", "begins", "learned")
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


def test_a_signals_declared_abstention_features_are_what_the_abstention_reads():
    """A signal that informs the abstention says so in its own record, and that is all the
    abstention needs: in a toy registry, its features join each mode they name (after the
    columns fitted so far), one that several signals name is their sum, a derived one reads the
    ranking, a signal without a value (dense, without embeddings) informs nothing, and a model
    fitted on those names scores with them."""
    toy = (replace(BY_NAME["lexical"], abstention_features=(
               AbstentionFeature("twice", ("sparse",), lambda signals, ranking: 2 * signals["lexical"]),)),
           replace(BY_NAME["rationale"], abstention_features=(AbstentionFeature("words", ("sparse", "full")),)),
           replace(BY_NAME["exemplar"], abstention_features=(AbstentionFeature("words", ("sparse", "full")),)),
           replace(BY_NAME["neighbour"], abstention_features=(AbstentionFeature("near", ("full",)),)))
    assert features_for_mode("sparse", toy) == ("coverage", "probability", "margin", "twice", "words")
    assert features_for_mode("full", toy) == ("coverage", "probability", "margin", "words", "near")

    index = build_index(TASKS, build_lexicon(CASES), FieldWeights())
    sparse = prefilter.prefilter(index, "developmental screening", Weights(), k=3)
    top, features = sparse.ranked[0].signals, answer_features(sparse, toy)
    assert top["lexical"] > 0 and top["rationale"] > 0
    assert features["twice"] == 2 * top["lexical"] and features["words"] == top["rationale"] + top["exemplar"]
    assert "near" not in features and "neighbour" not in features
    model = AbstentionModel(features_for_mode("sparse", toy), (1.0, 0.0, 0.0, 10.0, -1.0), 0.5, 0.0, {})
    assert model.logit(features) == pytest.approx(0.5 + features["coverage"] + 10 * features["twice"]
                                                  - features["words"])

    vectors = with_unit_vectors(index)
    full = prefilter.prefilter(vectors, "developmental screening", Weights(), k=3, query_vector=np.eye(len(TASKS))[0])
    assert full.mode == "full" and answer_features(full, toy)["near"] == full.ranked[0].signals["neighbour"]


def test_the_registry_declares_the_features_the_shipped_models_read_in_their_order():
    """The registry's own declarations give each mode the features the shipped demo fit's
    abstention models were fitted on, first and in that column order (confidence.FITTED_ORDER):
    they load and decide as before, and a fresh fit makes them again (a signal added since
    adds its features after them)."""
    params = ShippedFit.load(DEMO_FIT, DEMO_VECTORS).params
    for models in (params["abstention"], params.get("foreign_abstention") or {}):
        for mode, model in models.items():
            if model:
                assert features_for_mode(mode)[:len(model["features"])] == tuple(model["features"])
    declared = {f.name for s in REGISTRY for f in s.abstention_features}
    assert declared | set(confidence.RANKING_FEATURES) == set(features_for_mode("full")) | set(features_for_mode("sparse"))
