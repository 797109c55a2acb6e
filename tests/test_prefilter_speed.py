"""The query path's shortcuts give what the plain computation gives: the in-place exemplar scan,
the learned signal computed at the returned tasks only (weight 0), the explanations resolved
once per query (issue 16: a cheaper prefilter, the same results)."""
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from catalog.records import IMPLICIT_CATEGORY, CaseRecord, TaskRecord
from lexicon.rationale import build_lexicon
from search.exemplars import build_exemplars
from search.index import build_index
from search.learned import LearnedExemplar, build_learned_memory
from search.prefilter import explain_rows, prefilter, round_like_python, signal_mean, signal_values
from search.query import analyse_query
from search.signal.learned import learned_signal, learned_values
from search.exemplars import SCREEN_FROM
from search.signals import (group_max, grouped_products, half_screen_available, half_screen_error,
                            screened_group_max)
from settings import FieldWeights, Weights


def unit_rows(rng, n: int, dim: int = 24) -> np.ndarray:
    vectors = rng.normal(size=(n, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def blas_blocks_rows(rng=None) -> bool:
    """Whether the products are computed single-threaded (OPENBLAS_NUM_THREADS=1, as the
    benchmark runs): then OpenBLAS computes each row of `A @ x` the same wherever its block of
    GEMV_BLOCK rows lies, and the shortcuts give the plain values to the last bit. A
    multi-threaded OpenBLAS splits a product between its threads, each part with its own tail:
    then the values agree to the last bits only (allclose), as the gathered and the full
    product already did before. test_the_shortcuts_are_exact_single_threaded runs the exact
    checks in a single-threaded process."""
    return os.environ.get("OPENBLAS_NUM_THREADS") == "1"


def same(got: np.ndarray, want: np.ndarray, exact: bool) -> bool:
    return got.shape == want.shape and (np.array_equal(got, want) if exact else np.allclose(got, want, atol=1e-6))


def test_grouped_products_equal_the_gathered_and_the_whole_product():
    rng = np.random.default_rng(0)
    exact = blas_blocks_rows(rng)
    for n_groups, largest in ((1, 12), (2, 12), (7, 12), (60, 12), (7, 90), (40, 90)):   # gathered, in place
        sizes = rng.integers(1, largest, size=n_groups)
        ends = np.cumsum(sizes)
        starts = ends - sizes
        vectors = unit_rows(rng, int(ends[-1]), 384)
        for trial in range(40):
            query = unit_rows(rng, 1, 384)[0]
            groups = np.sort(rng.choice(n_groups, int(rng.integers(0, n_groups + 1)), replace=False))
            if trial == 0:
                groups = np.arange(n_groups)[-2:]   # the matrix's last rows (its product's tail)
            picked = np.concatenate([np.arange(starts[g], ends[g]) for g in groups] or [np.zeros(0, dtype=np.int64)])
            assert same(grouped_products(vectors, starts[groups], ends[groups], query), vectors[picked] @ query, exact)
            assert same(grouped_products(vectors, starts[groups], ends[groups], query, whole=True),
                        (vectors @ query)[picked], exact)


def test_the_neighbour_cascade_reads_its_exemplars_in_place_with_the_gathered_values():
    rng = np.random.default_rng(1)
    exact = blas_blocks_rows(rng)
    tasks = [TaskRecord(id=f"t{i}", name=f"task {i}") for i in range(50)]
    cases = [CaseRecord(query=f"query {i} {j}", gold=(f"t{(i * 7) % 50}",)) for i in range(900) for j in range(2)]
    memory = build_exemplars(tasks, cases, {})
    memory = memory.with_vectors(unit_rows(rng, len(memory.texts), 384), None)
    for _ in range(20):
        query = unit_rows(rng, 1, 384)[0]
        rows = np.sort(rng.choice(50, int(rng.integers(1, 25)), replace=False))
        wanted = np.isin(memory.group_rows, rows)                     # as the cascade did before
        groups = np.flatnonzero(wanted)
        picked = np.concatenate([np.arange(memory.group_starts[g], memory.group_ends[g]) for g in groups])
        lengths = memory.group_ends[groups] - memory.group_starts[groups]
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        plain = group_max(memory.vectors[picked] @ query, starts, memory.n_tasks, memory.group_rows[groups])
        assert same(memory.neighbour(query, rows), plain, exact)


@pytest.fixture(scope="module")
def learned_index():
    """40 tasks with vectors and learned exemplars on most of them."""
    rng = np.random.default_rng(2)
    tasks = [TaskRecord(id=f"t{i}", name=f"topic{i} form", help=f"record the topic{i} details") for i in range(40)]
    cases = [CaseRecord(query=f"topic{i % 40} entry {j}", gold=(f"t{i % 40}",), rationale=f"topic{i % 40} helps")
             for i in range(120) for j in range(2)]
    index = build_index(tasks, build_lexicon(cases), FieldWeights(), cases=cases)
    index = index.with_vectors(unit_rows(rng, 40), unit_rows(rng, len(index.exemplars.texts)), None)
    learned = [LearnedExemplar(f"learned {i} {j}", f"t{i}", 0.9, 3) for i in range(0, 40, 3) for j in range(3)]
    memory = build_learned_memory([t.id for t in tasks], learned)
    return index.with_learned(memory.with_vectors(unit_rows(rng, len(memory.texts)), 0.1)), rng


def test_a_learned_signal_of_weight_zero_is_computed_at_the_returned_tasks_only_with_the_same_values(learned_index):
    index, rng = learned_index
    exact = blas_blocks_rows(rng)
    weights = Weights(learned=0.0)
    rows, _ = index.visible(None, False)
    for query in ("topic3 entry", "record topic12", "topic30 form details", "nothing like it"):
        vector = unit_rows(rng, 1)[0]
        full = signal_values(index, analyse_query(index, query), rows, vector)["learned"]
        assert same(learned_signal(index.learned, rows, vector), full, exact)
        result = prefilter(index, query, weights, k=5, restrict_roles=False, query_vector=vector)
        # the same ranking as with the signal computed everywhere (it adds nothing at weight 0)
        plain = prefilter(index, query, replace(weights, learned=1e-300), k=5, restrict_roles=False,
                          query_vector=vector)
        assert [s.task.id for s in result.ranked] == [s.task.id for s in plain.ranked]
        assert result.effective_weights["learned"] == 0.0
        for item in result.ranked:
            position = [t.id for t in index.tasks].index(item.task.id)
            assert item.signals["learned"] == round(float(full[position]), 4)
            assert item.contributions["learned"] == 0.0
        shown = np.array([[t.id for t in index.tasks].index(s.task.id) for s in result.ranked])
        assert same(learned_values(index.learned, shown, vector), full[shown], exact)


def test_a_learned_signal_absent_for_every_visible_task_stays_absent_at_weight_zero(learned_index):
    index, rng = learned_index
    vector = unit_rows(rng, 1)[0]
    none_learned = index.with_learned(build_learned_memory([t.id for t in index.tasks], []))
    result = prefilter(none_learned, "topic3", Weights(learned=0.0), k=3, restrict_roles=False, query_vector=vector)
    assert "learned" not in result.effective_weights and "learned" not in result.ranked[0].signals


def test_explanations_are_resolved_once_per_query_for_every_result():
    tasks = [TaskRecord(id="asq", name="ASQ-3 Screening", help="Ages and stages."),
             TaskRecord(id="notes", name="Case Notes", help="Screening notes.")]
    cases = [CaseRecord(query="developmental screening", gold=("asq",), rationale="developmental screening tool")]
    index = build_index(tasks, build_lexicon(cases), FieldWeights(), cases=cases)
    analysed = analyse_query(index, "devlopmental screening")
    matched = explain_rows(index, [0, 1], analysed.words, analysed.corrections)
    assert {"term": "screening", "field": "name"} in matched[0] and {"term": "screening", "field": "help"} in matched[1]
    assert {"term": "screening", "field": "rationale"} in matched[0]
    assert not any(m["field"] == "rationale" for m in matched[1])
    corrected = [m for m in matched[0] if m["term"] == "devlopmental"]
    assert corrected and all(m["corrected_to"] == "developmental" and m["field"] == "rationale" for m in corrected)


def test_round_like_python_gives_python_s_own_rounding_of_every_value():
    rng = np.random.default_rng(4)
    values = np.concatenate([
        rng.normal(size=3000) * 10.0 ** rng.integers(-6, 4, size=3000),
        (rng.integers(-10**6, 10**6, size=3000) + 0.5) / 1e4,        # halfway cases, as the double has them
        rng.integers(-10**6, 10**6, size=3000) / 1e4,
        [0.0, -0.0, 1e-5, -1e-5, 5e-5, 1.5e-4, 2.675, 1.00005, np.inf, -np.inf, np.nan, 1e12, 123456789.123456]])
    got, want = round_like_python(values), [round(float(v), 4) for v in values]
    assert [repr(g) for g in got] == [repr(w) for w in want]   # repr: -0.0 and nan compare as themselves


def test_signal_mean_is_numpy_s_mean():
    rng = np.random.default_rng(5)
    for dtype in (np.float32, np.float64):
        for size in (1, 7, 150, 1001):
            values = rng.normal(size=size).astype(dtype)
            assert signal_mean(values) == float(values.mean())


needs_half_kernel = pytest.mark.skipif(not half_screen_available(), reason="SimSIMD has no float16 kernel here")


def near_ties(rng, n: int, dim: int = 384) -> np.ndarray:
    """Unit rows in fours of near-duplicates: their cosines to any query lie within the float16
    screen's error of each other, so the screen alone cannot tell which is nearest."""
    rows = np.repeat(unit_rows(rng, n // 4 + 1, dim), 4, axis=0)[:n]
    rows = rows + rng.normal(scale=1e-4, size=rows.shape).astype(np.float32)
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


@needs_half_kernel
def test_the_half_precision_screen_gives_the_float32_maxima_of_every_group():
    rng = np.random.default_rng(3)
    exact = blas_blocks_rows(rng)
    for n_groups, largest in ((1, 40), (7, 90), (40, 200), (150, 120), (400, 6)):   # (400, 6): short runs, gathered
        sizes = rng.integers(1, largest, size=n_groups)
        ends = np.cumsum(sizes)
        starts = ends - sizes
        vectors = near_ties(rng, int(ends[-1]))
        screen = vectors.astype(np.float16)
        error = half_screen_error(vectors.shape[1], float(np.linalg.norm(vectors, axis=1).max()))
        keep = rng.random(len(vectors)) < 0.7
        for trial in range(30):
            if trial % 3 == 0:   # a query next to an exemplar: the group's maximum is a near-tie
                query = vectors[rng.integers(len(vectors))] + rng.normal(scale=1e-4, size=vectors.shape[1])
                query = (query / np.linalg.norm(query)).astype(np.float32)
            else:
                query = unit_rows(rng, 1, vectors.shape[1])[0] * np.float32(0.5 if trial % 3 == 1 else 1.0)
            groups = np.sort(rng.choice(n_groups, int(rng.integers(1, n_groups + 1)), replace=False))
            if trial == 1:
                groups = np.arange(n_groups)[-2:]   # the matrix's last rows
            lengths = ends[groups] - starts[groups]
            offsets = np.concatenate(([0], np.cumsum(lengths)[:-1]))
            picked = np.concatenate([np.arange(starts[g], ends[g]) for g in groups])
            values = grouped_products(vectors, starts[groups], ends[groups], query)
            want = np.maximum.reduceat(values, offsets)
            want_kept = np.maximum(np.maximum.reduceat(np.where(keep[picked], values, -np.inf), offsets), -1.0)
            got, got_kept = screened_group_max(vectors, screen, error, starts[groups], ends[groups], query, keep)
            assert same(got, want, exact)
            assert same(got_kept, want_kept, exact)
            assert same(screened_group_max(vectors, screen, error, starts[groups], ends[groups], query)[0], want, exact)


def large_memory(rng, learned: bool):
    """A memory past SCREEN_FROM exemplars, with cases learned from use among them when `learned`."""
    tasks = [TaskRecord(id=f"t{i}", name=f"task {i}") for i in range(60)]
    cases = [CaseRecord(query=f"query {i}", gold=(f"t{(i * 7) % 60}",)) for i in range(SCREEN_FROM + 200)]
    implicit = [CaseRecord(query=f"typed {i}", gold=(f"t{i % 60}",), category=IMPLICIT_CATEGORY,
                           implicit=True)
                for i in range(600)] if learned else []
    memory = build_exemplars(tasks, [*cases, *implicit], {})
    vectors = near_ties(rng, len(memory.texts))
    return tasks, cases, memory.with_vectors(vectors, None)


@needs_half_kernel
def test_a_large_memory_screens_its_cascade_and_finds_the_same_neighbours():
    rng = np.random.default_rng(4)
    _, _, memory = large_memory(rng, learned=False)
    assert memory.screen is not None and memory.written is None
    plain = replace(memory, screen=None)
    for _ in range(20):
        query = unit_rows(rng, 1, 384)[0]
        rows = np.sort(rng.choice(60, int(rng.integers(1, 29)), replace=False))
        assert same(memory.neighbour(query, rows), plain.neighbour(query, rows), blas_blocks_rows(rng))


def test_the_written_cases_neighbours_come_from_the_served_products():
    """Where cases learned from use joined the memory, the cascade also gives each task's nearest
    exemplar among the written cases: what the written-cases-only memory gives (contributions.learned)."""
    rng = np.random.default_rng(5)
    tasks, cases, memory = large_memory(rng, learned=True)
    assert memory.written is not None and (~memory.written).sum() == 600
    position = {(text, int(row)): j for j, (text, row) in enumerate(zip(memory.texts, memory.task_rows))}
    written = build_exemplars(tasks, cases, {})
    picked = [position[(text, int(row))] for text, row in zip(written.texts, written.task_rows)]
    written = written.with_vectors(memory.vectors[picked], None)
    for trial in range(20):
        query = unit_rows(rng, 1, 384)[0]
        rows = np.sort(rng.choice(60, int(rng.integers(1, 60)), replace=False)) if trial else None
        best, kept = memory.neighbours(query, rows)
        assert same(best, memory.neighbour(query, rows), True)
        assert np.allclose(kept, written.neighbour(query, rows), atol=1e-6)
        assert (kept <= best).all()


def test_the_shortcuts_are_exact_single_threaded():
    """The checks above, exact, in a process whose OpenBLAS runs one thread (see blas_blocks_rows)."""
    checks = ("test_grouped_products_equal_the_gathered_and_the_whole_product",
              "test_the_neighbour_cascade_reads_its_exemplars_in_place_with_the_gathered_values",
              *(("test_the_half_precision_screen_gives_the_float32_maxima_of_every_group",
                 "test_a_large_memory_screens_its_cascade_and_finds_the_same_neighbours") if half_screen_available() else ()))
    code = "import tests.test_prefilter_speed as t; " + "; ".join(f"t.{name}()" for name in checks)
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
