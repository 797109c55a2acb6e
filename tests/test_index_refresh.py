"""The live index is refreshed off the request path: while one rebuild embeds the catalog,
requests are answered from the old index, and only one rebuild runs at a time."""
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from catalog.records import TaskRecord
from infra.metrics import Metrics
from serving.service import SearchService

TASKS = [
    TaskRecord(id="health.asq3", name="ASQ-3 Screening", help="Ages and Stages developmental screening"),
    TaskRecord(id="fiscal.inkind", name="In-Kind Tracking", help="Non-federal share volunteer hours"),
    TaskRecord(id="transport.routes", name="Bus Routes", help="School bus routes and stops"),
]
NEW_TASK = TaskRecord(id="meals.count", name="Meal Count", help="CACFP meal counts per classroom")


class MemorySource:
    """A CatalogSource in memory: `tasks` can change, and every change moves the revision."""

    def __init__(self, tasks):
        self._tasks, self._revision = list(tasks), 1

    def revision(self):
        return self._revision

    def tasks(self):
        return list(self._tasks)

    def cases(self):
        return []

    def latest_fit(self):
        return None

    def fit_for_digest(self, digest):
        return None

    def add(self, task):
        self._tasks.append(task)
        self._revision += 1


class GatedEmbedder:
    """Deterministic vectors; once `gate` is cleared, embedding passages (the rebuild) blocks
    until it is set again. Queries never block."""

    model = "fake"

    def __init__(self):
        self.gate = threading.Event()
        self.gate.set()
        self.passage_calls = 0
        self.rebuild_started = threading.Event()

    def embed(self, texts, kind):
        if kind == "passage":
            self.passage_calls += 1
            self.rebuild_started.set()
            assert self.gate.wait(30), "test never released the rebuild"
        vectors = np.array([[len(t) % 7 + 1.0, sum(map(ord, t)) % 11 + 1.0, 1.0] for t in texts], dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_searches_are_served_from_the_old_index_while_one_rebuild_runs(settings):
    source, embedder, metrics = MemorySource(TASKS), GatedEmbedder(), Metrics()
    service = SearchService(settings, source, embedder, None, metrics)
    assert service.live().revision == 1  # the very first build blocks: there is nothing to serve yet
    assert embedder.passage_calls == 1

    embedder.gate.clear()  # from now on a rebuild hangs in the embedder until released
    embedder.rebuild_started.clear()
    source.add(NEW_TASK)
    pool = ThreadPoolExecutor(max_workers=6)
    try:
        started = time.perf_counter()
        futures = [pool.submit(service.search, "meal count", 5) for _ in range(12)]
        bodies = [f.result(timeout=10) for f in futures]
        elapsed = time.perf_counter() - started
        assert embedder.rebuild_started.wait(10)
        assert elapsed < 5, f"searches waited {elapsed:.1f} s for the rebuild"
        assert all("meals.count" not in {r["id"] for r in body["results"]} for body in bodies)
        assert service.live().revision == 1  # still the old index: the rebuild is held in the embedder
        assert embedder.passage_calls == 2  # one rebuild for all those requests (single flight)
    finally:
        embedder.gate.set()
        pool.shutdown(wait=True)
    assert service.live(wait=True).revision == 2
    assert "meals.count" in {r["id"] for r in service.search("meal count", 5)["results"]}
    assert embedder.passage_calls == 2
    assert metrics.index_rebuilds._value.get() == 2


def test_a_failed_background_rebuild_keeps_the_old_index_and_is_retried(settings):
    source = MemorySource(TASKS)
    service = SearchService(settings, source, None, None, Metrics())
    first = service.live()
    broken = threading.Event()

    def failing_tasks():
        broken.set()
        raise RuntimeError("database went away")

    source.tasks = failing_tasks
    source._revision = 2
    assert service.live() is first  # the rebuild fails in the background
    assert broken.wait(10)
    deadline = time.monotonic() + 10
    while service._refreshing and time.monotonic() < deadline:
        time.sleep(0.01)
    assert service.live() is first  # still served; the request started another attempt
    del source.tasks  # the database is back
    assert service.live(wait=True).revision == 2
