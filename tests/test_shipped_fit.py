"""The demo's shipped fit and vectors (search.shipped): what `load-demo` installs instead of fitting.

They must be exactly what a fresh machine would compute, or the first answers of `make run`
would not be final: a fresh fit of the demo must equal the shipped one, a sample of the shipped
vectors must equal what the model embeds now, and the answers of a store with the shipped fit
must equal those of a store that fitted itself. When one of these fails after a change to the
fitting code, the demo data or a default setting, rewrite the artefact:

    python -m search.shipped write
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from catalog.demo import DEMO_FIT, DEMO_VECTORS
from search.shipped import ShippedFit, demo_store, fit_inputs, install, refusal
from tests.conftest import build_app, make_settings


@pytest.fixture(scope="module")
def shipped() -> ShippedFit:
    return ShippedFit.load(DEMO_FIT, DEMO_VECTORS)


@pytest.fixture(scope="module")
def fresh_app(tmp_path_factory, shared_cache_dir, demo_tasks, demo_cases):
    """An app over a fresh store holding the demo, which fits itself (the slow way, once)."""
    app = build_app(make_settings(tmp_path_factory.mktemp("fresh"), shared_cache_dir), demo_tasks, demo_cases)
    services = app.extensions["taskfinder"]
    report = services.search.refit_now()
    assert report["status"] == "fitted"
    return app, services, services.store


def test_a_fresh_fit_of_the_demo_equals_the_shipped_one(fresh_app, shipped):
    from search.fitting import cases_digest

    _, services, source = fresh_app
    stored = source.fit_for_digest(cases_digest(source.tasks(), source.cases()))
    assert stored.params == shipped.params, "stale artefact: run `python -m search.shipped write`"
    assert shipped.digest == cases_digest(source.tasks(), source.cases())
    assert shipped.inputs == fit_inputs(services.settings, services.search.embedder.model)


def test_the_shipped_vectors_are_what_the_model_embeds(shipped, fresh_app):
    _, services, _ = fresh_app
    embedder = services.search.embedder.inner          # the model itself, past the cache
    for kind, (texts, vectors) in shipped.vectors.items():
        sample = list(range(0, len(texts), max(1, len(texts) // 12)))
        again = embedder.embed([texts[i] for i in sample], kind)
        np.testing.assert_allclose(again, vectors[sample], atol=1e-6)


def test_load_demo_installs_it_and_answers_as_a_store_that_fitted_itself(tmp_path, fresh_app, shipped):
    from app import create_app

    fitted_app, _, _ = fresh_app
    app = create_app(make_settings(tmp_path / "data", tmp_path / "cache"))   # an empty embedding cache
    result = app.test_cli_runner().invoke(args=["load-demo"])
    assert result.exit_code == 0, result.output
    assert "installed the demo's shipped fit" in result.output
    services = app.extensions["taskfinder"]
    assert services.store.latest_fit().report["shipped"] is True
    for query in ("kids shots", "asq", "bus driver background check", "devel", "how do i enroll a child", "xyzzy"):
        mine = services.search.search(query, k=5)
        theirs = fitted_app.extensions["taskfinder"].search.search(query, k=5)
        assert [(r["id"], r["score"]) for r in mine["results"]] == [(r["id"], r["score"]) for r in theirs["results"]]
        assert mine.get("no_confident_match") == theirs.get("no_confident_match")
    # a second load-demo neither installs nor fits again
    again = app.test_cli_runner().invoke(args=["load-demo"])
    assert "installed" not in again.output and "fitting now" not in again.output


def test_it_is_refused_where_it_would_not_be_what_a_fit_makes(tmp_path, shipped, shared_cache_dir):
    from catalog.records import CaseRecord

    settings = make_settings(tmp_path, shared_cache_dir)
    store = demo_store(tmp_path)

    class Model:
        model = "multilingual-e5-small-q4"

        def seed(self, texts, kind, vectors):
            return len(texts)

    assert refusal(shipped, store, settings, Model()) is None
    other = dataclasses.replace(settings, abstain_budget=0.1)
    assert "settings" in refusal(shipped, store, other, Model())
    assert "settings" in refusal(shipped, store, settings, None)          # no embeddings: another fit
    store.import_cases([CaseRecord(query="a brand new case", gold=("health.immunizations",))])
    assert "differ" in install(shipped, store, settings, Model())["status"]
