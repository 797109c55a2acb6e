"""A fit that ships with a catalog: the demo's ranker fit and the vectors its index needs.

Fitting the demo takes ~25 s on 2 cores and embedding its 200 tasks and 258 cases another ~8 s,
so `load-demo` used to keep a newcomer waiting for a minute before the first search (issue 34).
Both are deterministic functions of the demo data, the settings that shape a fit and the
embedding model, so they are computed once, committed beside the demo data
(catalog/data/headstart_fit.json, headstart_vectors.npz) and installed by `load-demo`:

- `install` stores the shipped fit as the store's fit for exactly this data (the same row
  `python app.py fit` would write), and seeds the embedding cache with the shipped vectors,
  but only where everything the fit depends on matches what it was made with: the cases digest
  (search.fitting.cases_digest), `fit_inputs` (the settings a fit reads, the embedding model),
  and no fit stored for this data yet. Anything else is refused with the reason, and the caller
  fits as before.
- `tests/test_shipped_fit.py` fits the demo afresh and requires the result to equal the
  shipped one, and embeds a sample of the shipped texts again: a change to the fitting code or
  the demo data that is not followed by `python -m search.shipped write` fails the suite, so the
  artefact cannot go stale.

The vectors are float32 as the model produced them (not rounded): with them the first answers
are the very answers a fresh machine computing its own would give.

A fit is reproducible to the bit only with the same BLAS threading: OpenBLAS splits a product
differently across threads, and the prototype fit (L-BFGS over 200 x 384 weights) carries the
difference on (measured: the top score of "kids shots" 6.0324 with one thread, 6.0776 with two).
So the artefact is made and checked with OpenBLAS on one thread (`BLAS_THREADS`): `write` and
`check` run themselves again with OPENBLAS_NUM_THREADS=1 when the environment says otherwise.
A server never refits the data it was installed for, so its answers stay the shipped ones.

Nor is a fit the same to the bit on another CPU: numpy and OpenBLAS pick their kernels by the
instructions the CPU has (AVX-512 or not), and a sum taken in another order rounds otherwise.
Two AMD EPYC VMs whose model embedded every sampled text to the same bit still fitted the demo
to different params (one with AVX-512, one without); so did two with the same AVX-512 levels
whose OpenBLAS chose different kernels. So the artefact records the instruction sets and the
OpenBLAS kernels it was made with (`machine`), and `check` compares the params only on a machine with the
same ones; elsewhere it compares what does not depend on them (the data, the settings, the
texts) and says so.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np

from catalog.records import CaseRecord, TaskRecord
from search.fitting import cases_digest
from settings import Settings

#: The settings a fit reads (search.fitting.fit_ranker, default_params): a shipped fit made with
#: other values is not installed.
BLAS_THREADS = "1"
FIT_SETTINGS = ("shortlist_size", "weights", "degraded_weights", "field_weights", "typo_min_similarity",
                "ranker_fit", "fit_min_cases", "abstain", "abstain_budget", "abstain_offtopic",
                "catalog_enrichment", "embeddings_enabled", "learning_enabled")


def machine() -> list[str]:
    """What a fit's bits depend on besides the code, the data and the BLAS threading: the CPU
    instruction-set levels numpy dispatches on here (its public build report, `np.show_config`)
    and the kernel each loaded OpenBLAS chose for this CPU ("openblas:Haswell"), read by
    threadpoolctl (the maintained reader of what a process's BLAS libraries are; numpy's own
    `show_runtime` uses it). The two can disagree: an AMD EPYC of family 26 (Zen 5) reports the
    AVX-512 levels the artefact was made with, yet its OpenBLAS runs the Haswell kernels, and its
    demo fit differed from the shipped one; with OPENBLAS_CORETYPE=SkylakeX the same machine
    fitted the shipped params to the bit (2026-11-30), so those are the kernels they were made with."""
    import scipy.linalg  # noqa: F401  (loads scipy's own OpenBLAS, which the fit's L-BFGS runs on)
    from threadpoolctl import threadpool_info

    simd = np.show_config(mode="dicts").get("SIMD Extensions", {})
    kernels = {f"{pool['internal_api']}:{pool.get('architecture')}" for pool in threadpool_info()
               if pool.get("user_api") == "blas"}
    return sorted({*simd.get("baseline", ()), *simd.get("found", ()), *kernels})


class FitSource(Protocol):
    def revision(self) -> int: ...
    def tasks(self) -> list[TaskRecord]: ...
    def cases(self) -> list[CaseRecord]: ...
    def fit_for_digest(self, digest: str): ...
    def save_fit(self, fitted_on_revision: int, digest: str, params: dict, report: dict) -> int: ...


class VectorCache(Protocol):
    model: str

    def seed(self, texts: Sequence[str], kind: str, vectors: np.ndarray) -> int: ...


def fit_inputs(settings: Settings, embedding_model: str | None) -> str:
    """A digest of everything besides the data that a fit depends on."""
    values = {name: getattr(settings, name) for name in FIT_SETTINGS}
    payload = {name: (asdict(value) if hasattr(value, "__dataclass_fields__") else value)
               for name, value in values.items()}
    payload["embedding_model"] = embedding_model
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ShippedFit:
    digest: str                 # search.fitting.cases_digest of the data it was made on
    inputs: str                 # fit_inputs
    params: dict                # RankerParams.as_dict()
    report: dict
    vectors: dict[str, tuple[tuple[str, ...], np.ndarray]]   # kind -> (texts, float32 vectors)
    machine: tuple[str, ...] | None = None   # `machine()` where it was made (None: not recorded)

    @classmethod
    def load(cls, fit_path: Path, vectors_path: Path) -> "ShippedFit":
        row = json.loads(fit_path.read_text(encoding="utf-8"))
        vectors: dict[str, tuple[tuple[str, ...], np.ndarray]] = {}
        if vectors_path.exists():
            with np.load(vectors_path, allow_pickle=False) as stored:
                texts = json.loads(str(stored["texts"]))
                for kind in texts:
                    vectors[kind] = (tuple(texts[kind]), np.asarray(stored[f"vectors_{kind}"], dtype=np.float32))
        made_on = row.get("machine")
        return cls(row["digest"], row["inputs"], row["params"], row["report"], vectors,
                   tuple(made_on) if made_on is not None else None)

    def save(self, fit_path: Path, vectors_path: Path) -> None:
        row = {"digest": self.digest, "inputs": self.inputs, "params": self.params, "report": self.report,
               "machine": list(self.machine) if self.machine is not None else None}
        fit_path.write_text(json.dumps(row, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
        texts = {kind: list(pair[0]) for kind, pair in self.vectors.items()}
        arrays = {f"vectors_{kind}": pair[1].astype(np.float32) for kind, pair in self.vectors.items()}
        with open(vectors_path, "wb") as out:
            np.savez_compressed(out, texts=np.array(json.dumps(texts, ensure_ascii=False)), **arrays)


def refusal(shipped: ShippedFit, source: FitSource, settings: Settings, embedder: VectorCache | None) -> str | None:
    """Why the shipped fit may not be installed on this store with these settings, or None."""
    if not settings.ranker_fit:
        return "RANKER_FIT is off"
    digest = cases_digest(source.tasks(), source.cases())
    if digest != shipped.digest:
        return "the catalog or its test cases differ from the ones the shipped fit was made on"
    if fit_inputs(settings, embedder.model if embedder is not None else None) != shipped.inputs:
        return "settings that shape a fit (or the embedding model) differ from the shipped fit's"
    if source.fit_for_digest(digest) is not None:
        return "up to date"
    return None


def install(shipped: ShippedFit, source: FitSource, settings: Settings, embedder: VectorCache | None) -> dict:
    """Install the shipped fit (and seed its vectors) where `refusal` allows; the report says
    what happened: {"status": "installed", "fit_id", "vectors"} or {"status": <the reason>}."""
    reason = refusal(shipped, source, settings, embedder)
    if reason is not None:
        return {"status": reason}
    seeded = 0
    if embedder is not None:
        for kind, (texts, vectors) in shipped.vectors.items():
            seeded += embedder.seed(texts, kind, vectors)
    fit_id = source.save_fit(source.revision(), shipped.digest, shipped.params,
                             {**shipped.report, "shipped": True})
    return {"status": "installed", "fit_id": fit_id, "vectors": seeded}


# SHIPPED_TEXTS: the vectors shipped are every text the demo's fit embeds (its tasks, its cases
# and the cross-validation queries: each case's typed prefixes, search.fitting.typed), not only the
# 668 the serving index needs. A refit of the demo's data after a first edit, and every fit the
# suite makes of the demo or of its splits, then embeds only what is new: ~2,700 prefixes, 55-68 s
# of a refit's 100-112 s on the AMD EPYC machine, 45 s left (issue 44 item 9; measured with
# `python -m cProfile -m search.shipped check`, an empty cache against a warm one). The cost: the
# artefact grows from 0.96 MB to ~5 MB, and load-demo seeds ~3,400 vectors instead of 668.
class _Recorder:
    """An embedder in front of another that remembers every text it was asked for, by kind."""

    def __init__(self, inner) -> None:
        self.inner, self.model = inner, inner.model
        self.seen: dict[str, dict[str, np.ndarray]] = {}

    def embed(self, texts: Sequence[str], kind: str) -> np.ndarray:
        vectors = self.inner.embed(texts, kind)
        seen = self.seen.setdefault(kind, {})
        for text, vector in zip(texts, vectors):
            seen[text] = vector
        return vectors


def make(settings: Settings, source: FitSource, embedder) -> ShippedFit:
    """Fit as `python app.py fit` does on a fresh store (no learned evidence yet) and record the
    vectors the fit and the serving index of that store embed (SHIPPED_TEXTS). `source` is a store holding the catalog:
    the fit must see tasks and cases exactly as the store hands them to the service (its order)."""
    from search.assembly import attach_vectors, serving_index
    from search.fitting import fit_ranker
    from search.ranker import default_params

    tasks, cases = source.tasks(), source.cases()
    recorder = _Recorder(embedder)   # the texts the fit's cross-validation embeds (SHIPPED_TEXTS)
    params, report = fit_ranker(settings, tasks, cases, recorder, default_params(settings))
    if report.get("status") != "fitted":
        raise RuntimeError(f"the fit did not fit: {report.get('status')}")
    attach_vectors(serving_index(settings, tasks, cases, params), recorder)   # the texts search.assembly's index embeds
    vectors = {kind: (tuple(seen), np.stack(list(seen.values())).astype(np.float32))
               for kind, seen in sorted(recorder.seen.items())}
    return ShippedFit(cases_digest(tasks, cases), fit_inputs(settings, embedder.model), params.as_dict(),
                      report, vectors, tuple(machine()))


def demo_store(directory: Path):
    """A migrated SQLite store in `directory` holding the demo catalog and its cases."""
    from catalog import db
    from catalog.demo import DEMO_CASES, DEMO_CATALOG
    from catalog.formats import load_cases_file, load_tasks_file
    from catalog.store import CatalogStore

    engine = db.make_engine(f"sqlite:///{directory / 'demo.db'}")
    db.upgrade(engine)
    store = CatalogStore(engine)
    tasks = load_tasks_file(DEMO_CATALOG)
    store.import_tasks(tasks)
    store.import_cases(load_cases_file(DEMO_CASES, {t.id for t in tasks}))
    return store


def main(argv: list[str] | None = None) -> int:
    """`python -m search.shipped write|check`: refit the demo, then rewrite its shipped fit and
    vectors (write), or exit 1 naming what differs from them (check; tests/test_shipped_fit.py)."""
    parser = argparse.ArgumentParser(prog="python -m search.shipped")
    parser.add_argument("command", choices=["write", "check"])
    args = parser.parse_args(argv)
    if os.environ.get("OPENBLAS_NUM_THREADS") != BLAS_THREADS:   # see the module docstring
        env = {**os.environ, "OPENBLAS_NUM_THREADS": BLAS_THREADS}
        os.execve(sys.executable, [sys.executable, "-m", "search.shipped", args.command], env)
    import tempfile

    from catalog.demo import DEMO_FIT, DEMO_VECTORS
    from infra.cache import HealingCache
    from search.embeddings import build_embedder

    settings = Settings.from_env()
    with tempfile.TemporaryDirectory() as directory:
        fresh = make(settings, demo_store(Path(directory)), build_embedder(settings, HealingCache(settings.cache_dir)))
    if args.command == "write":
        fresh.save(DEMO_FIT, DEMO_VECTORS)
        counts = {kind: len(pair[0]) for kind, pair in fresh.vectors.items()}
        print(f"wrote {DEMO_FIT.name} (digest {fresh.digest[:12]}) and {DEMO_VECTORS.name} {counts}")
        return 0
    shipped = ShippedFit.load(DEMO_FIT, DEMO_VECTORS)
    same_machine = shipped.machine == fresh.machine     # see the module docstring
    differences = [name for name, same in (
        ("digest (the demo data)", fresh.digest == shipped.digest),
        ("inputs (the settings of a fit, the embedding model)", fresh.inputs == shipped.inputs),
        ("params (the fit itself)", fresh.params == shipped.params or not same_machine),
        ("the texts the index embeds", {k: v[0] for k, v in fresh.vectors.items()}
         == {k: v[0] for k, v in shipped.vectors.items()}),
    ) if not same]
    if differences:
        print("the shipped demo fit is stale: " + "; ".join(differences) + ". Run `python -m search.shipped write`.")
        return 1
    if not same_machine:
        print("the shipped demo fit was made on a CPU with other instruction sets or OpenBLAS kernels: its data, settings and texts "
              "are what a fresh fit makes; its params are compared only on such a CPU")
        return 0
    print("the shipped demo fit is what a fresh fit makes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
