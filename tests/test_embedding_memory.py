"""CachedEmbedder's in-memory front (search.embeddings): a vector looked up once is served from
memory afterwards, without touching the disk cache; bounded; the same vectors either way."""
import diskcache
import numpy as np

from search.embeddings import CachedEmbedder


class CountingModel:
    model = "counting"

    def __init__(self):
        self.texts = []

    def embed(self, texts, kind):
        self.texts += list(texts)
        vectors = np.array([[len(t) + 1.0, sum(map(ord, t)) % 13 + 1.0, 1.0] for t in texts], dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


class CountingDisk(diskcache.Cache):
    reads = 0

    def get(self, key, *args, **kwargs):
        self.reads += 1
        return super().get(key, *args, **kwargs)


def test_vectors_come_from_memory_after_the_first_lookup(tmp_path):
    disk = CountingDisk(str(tmp_path / "cache"))
    model = CountingModel()
    embedder = CachedEmbedder(model, disk)
    first = embedder.embed(["hearing screening", "bus routes"], "passage")
    reads = disk.reads
    again = embedder.embed(["hearing screening", "bus routes"], "passage")
    assert disk.reads == reads and model.texts == ["hearing screening", "bus routes"]
    np.testing.assert_array_equal(first, again)
    # a new process (a fresh embedder) reads the disk once, then memory
    other = CachedEmbedder(model, disk)
    np.testing.assert_array_equal(other.embed(["bus routes"], "passage"), first[1:])
    other.embed(["bus routes"], "passage")
    assert disk.reads == reads + 1 and len(model.texts) == 2


def test_memory_is_bounded_and_can_be_switched_off(tmp_path):
    disk = CountingDisk(str(tmp_path / "cache"))
    embedder = CachedEmbedder(CountingModel(), disk, memory_size=2)
    embedder.embed(["a", "b", "c"], "query")
    assert len(embedder._memory) == 2
    off = CachedEmbedder(CountingModel(), disk, memory_size=0)
    off.embed(["a"], "query")
    reads = disk.reads
    off.embed(["a"], "query")
    assert disk.reads == reads + 1
