"""The answer cache (serving.answer_cache): a repeated search without re-ranking is answered
without running the pipeline again, never across indexes, roles, k, degraded or re-ranked
answers, and the answer it gives is the one the pipeline gives."""
import numpy as np
import pytest

import serving.service
from catalog.records import TaskRecord
from infra.metrics import Metrics
from serving.answer_cache import AnswerCache
from search.embeddings import EmbeddingUnavailable
from serving.service import SearchService
from tests.test_index_refresh import NEW_TASK, MemorySource

TASKS = [
    TaskRecord(id="health.asq3", name="ASQ-3 Screening", help="Ages and Stages developmental screening"),
    TaskRecord(id="fiscal.budget", name="Budget Revisions", help="Revise the meal budget", roles=("fiscal",)),
    TaskRecord(id="transport.routes", name="Bus Routes", help="School bus routes and stops"),
]


@pytest.fixture
def pipeline_runs(monkeypatch):
    """One entry per run of the pipeline (SearchService._answer: analyse, prefilter, fuse, and for
    a catalog with restricted tasks the all-roles prefilter behind `hidden_by_role`)."""
    calls = []
    real = serving.service.SearchService._answer

    def counting(self, *args, **kwargs):
        calls.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(serving.service.SearchService, "_answer", counting)
    return calls


def make_service(settings, source=None, embedder=None, **overrides):
    source = source or MemorySource(TASKS)
    service = SearchService(settings.with_overrides(revision_poll_s=3600, **overrides), source, embedder, None,
                            Metrics())
    service.live()
    return service


def ids(body):
    return [row["id"] for row in body["results"]]


def hits(service, result="hit"):
    return service.metrics.registry.get_sample_value("taskfinder_answer_cache_lookups_total", {"result": result})


def test_a_repeated_query_is_answered_from_the_cache(settings, pipeline_runs):
    service = make_service(settings)
    first = service.search("bus routes", k=3)
    second = service.search("bus routes", k=3)
    assert len(pipeline_runs) == 1
    assert {k: v for k, v in second.items() if k != "timings_ms"} == {k: v for k, v in first.items() if k != "timings_ms"}
    assert second["timings_ms"]["prefilter"] == 0.0 and "answer_cache" in second["timings_ms"]
    assert set(second["timings_ms"]) == set(first["timings_ms"]) | {"answer_cache"}
    assert (hits(service, "miss"), hits(service, "hit")) == (1, 1)
    stages = service.metrics.registry.get_sample_value("taskfinder_stage_seconds_count", {"stage": "total"})
    assert stages == 2  # every response counts, cached or not (the zero-result rate divides by it)


def test_a_caller_changing_its_answer_changes_no_later_one(settings):
    service = make_service(settings)
    body = service.search("bus routes", k=3)
    body["access"] = {"credential": "token"}
    body["extra"] = 1
    again = service.search("bus routes", k=3)
    assert "access" not in again and "extra" not in again


def test_k_and_verified_roles_are_part_of_the_key(settings, pipeline_runs):
    service = make_service(settings)
    fiscal = service.search("budget revisions", k=3, roles={"fiscal"})
    anonymous = service.search("budget revisions", k=3)
    assert "fiscal.budget" in ids(fiscal) and "fiscal.budget" not in ids(anonymous)
    assert len(service.search("budget revisions", k=1)["results"]) <= 1
    assert len(pipeline_runs) == 3
    assert ids(service.search("budget revisions", k=3)) == ids(anonymous)  # now a hit, still without it
    assert len(pipeline_runs) == 3


def test_a_new_index_starts_with_an_empty_cache(settings):
    source = MemorySource(TASKS)
    service = make_service(settings, source)
    assert "meals.count" not in ids(service.search("meal count", k=5))
    source.add(NEW_TASK)
    service.live(wait=True)
    assert "meals.count" in ids(service.search("meal count", k=5))


def test_rerank_requests_and_a_disabled_cache_always_run_the_pipeline(settings, pipeline_runs):
    service = make_service(settings)
    service.search("bus routes", rerank=True)
    service.search("bus routes", rerank=True)
    assert len(pipeline_runs) == 2
    off = make_service(settings, answer_cache_size=0)
    off.search("bus routes")
    off.search("bus routes")
    assert len(pipeline_runs) == 4


class FlakyEmbedder:
    """Task vectors work; queries fail while `down` (an embedding outage after start)."""

    model = "fake"

    def __init__(self):
        self.down = False

    def embed(self, texts, kind):
        if kind == "query" and self.down:
            raise EmbeddingUnavailable("embedding endpoint is away")
        vectors = np.array([[len(t) % 7 + 1.0, sum(map(ord, t)) % 11 + 1.0, 1.0] for t in texts], dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_a_degraded_answer_is_not_kept(settings, pipeline_runs):
    embedder = FlakyEmbedder()
    service = make_service(settings, embedder=embedder)
    embedder.down = True
    assert service.search("bus routes")["degraded"] == ["embeddings_unavailable"]
    embedder.down = False
    assert service.search("bus routes")["degraded"] == []  # computed again, with embeddings
    assert len(pipeline_runs) == 2


def test_least_recently_used_answers_are_evicted():
    cache = AnswerCache(owner=None, capacity=2)
    cache.put("a", {"n": 1})
    cache.put("b", {"n": 2})
    assert cache.get("a") == {"n": 1}  # "a" is now the most recently used
    cache.put("c", {"n": 3})
    assert cache.get("b") is None and cache.get("a") == {"n": 1} and cache.get("c") == {"n": 3}
    assert len(cache) == 2
