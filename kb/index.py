"""The BM25 index: a CSC matrix of precomputed per-(document, term) BM25 weights (search.bm25's).

Why this engine (measured in ops/bench_kb.py): rank-bm25 walks every document in Python for
every query term; here a query is a gather of a few posting columns plus one `np.bincount`,
which answers SciFact queries in well under a millisecond and 1M-document queries in
milliseconds. The weights are recomputed from raw term frequencies in one vectorised pass
whenever corpus statistics change, so an incremental update only re-tokenises changed docs.

Layout
- `text_tf`: CSR (docs x vocab) raw term counts of title + text.
- `fields[name]`: CSR of *injected* postings (same shape), e.g. "enrich" (SIRA n-gram
  enrichment, weighted) or "sage" (SAGE keywords). Stored documents are never rewritten.
- views: "text" = text_tf; "enriched" = text_tf + fields["enrich"]; "sage" = text_tf +
  fields["sage"]. Each view has its own BM25 statistics (N, df, |D|, avgdl), built lazily.
- `seq`/`seq_ptr`: the analysed term-id sequence of every document, for phrase (n-gram) DF.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from kb.analysis import analyze, ngram_token, sliding_ngrams
from search.bm25 import average_length, length_normalised_tf, lucene_idf, saturate

FORMAT_VERSION = 1
LOAD_ATTEMPTS = 5  # Index.load restarts when concurrent saves remove the version it is reading
VIEWS = {"text": None, "enriched": "enrich", "sage": "sage"}
DEFAULT_K1 = 0.9  # Pyserini's BEIR BM25 parameters
DEFAULT_B = 0.4


@dataclass(frozen=True)
class DocInput:
    """A document as the index sees it: id, content hash, and the text to analyse."""

    id: str
    hash: str
    text: str


class SparseBM25:
    """Immutable BM25 scorer over a (docs x terms) term-frequency CSR matrix.

    The weights are search.bm25's (Lucene's BM25Similarity, as Pyserini/Anserini run it for the
    BEIR baselines, and bm25s's "lucene" method), computed for every posting at once:

        score(q, D) = sum_{t in q} w_q(t) * idf(t) * tf~ / (k1 + tf~),   tf~ = tf / (1 - b + b * |D| / avgdl)

    With w_q(t) = the count of t in the query this is plain BM25 over a bag of words (Lucene's
    BooleanQuery of TermQuery clauses, which Pyserini's bag-of-words query generator builds).
    Unlike Lucene, document lengths are exact (Lucene stores them lossily in one byte)."""

    def __init__(self, tf: sp.csr_matrix, k1: float = DEFAULT_K1, b: float = DEFAULT_B):
        tf = sp.csr_matrix(tf, dtype=np.float32)
        n_docs, n_terms = tf.shape
        self.n_docs = n_docs
        self.k1, self.b = k1, b
        self.doc_len = np.asarray(tf.sum(axis=1), dtype=np.float64).ravel()
        self.avgdl = average_length(self.doc_len)
        self.df = np.bincount(tf.indices, minlength=n_terms).astype(np.int64)
        self.idf = lucene_idf(self.df, n_docs)
        data = np.empty_like(tf.data)
        # chunked over rows to keep temporaries small on 1M-document corpora
        step = 200_000
        for lo in range(0, n_docs, step):
            hi = min(n_docs, lo + step)
            a, z = tf.indptr[lo], tf.indptr[hi]
            rows = np.repeat(np.arange(lo, hi), np.diff(tf.indptr[lo:hi + 1]))
            pseudo_tf = length_normalised_tf(tf.data[a:z], self.doc_len[rows], self.avgdl, b)
            data[a:z] = saturate(pseudo_tf, self.idf[tf.indices[a:z]], k1).astype(np.float32)
        weights = sp.csr_matrix((data, tf.indices, tf.indptr), shape=tf.shape)
        self.weights = weights.tocsc()
        self.weights.sort_indices()

    def score(self, term_ids: Sequence[int], query_weights: Sequence[float]) -> np.ndarray:
        """Dense score vector: sum_t w_q(t) * W[:, t] (one bincount over the posting lists)."""
        W = self.weights
        idx_parts, val_parts = [], []
        for t, w in zip(term_ids, query_weights):
            if t < 0 or t >= W.shape[1] or w == 0:
                continue
            s, e = W.indptr[t], W.indptr[t + 1]
            if e > s:
                idx_parts.append(W.indices[s:e])
                val_parts.append(W.data[s:e] * np.float32(w))
        if not idx_parts:
            return np.zeros(self.n_docs, dtype=np.float64)
        return np.bincount(np.concatenate(idx_parts), weights=np.concatenate(val_parts), minlength=self.n_docs)

    def term_doc_weight(self, term_id: int, doc_rows: np.ndarray) -> np.ndarray:
        """W[doc, term] for a few documents (0 where the term is absent)."""
        W = self.weights
        if term_id < 0 or term_id >= W.shape[1]:
            return np.zeros(len(doc_rows))
        s, e = W.indptr[term_id], W.indptr[term_id + 1]
        col_idx, col_val = W.indices[s:e], W.data[s:e]
        pos = np.searchsorted(col_idx, doc_rows)
        pos_c = np.minimum(pos, max(len(col_idx) - 1, 0))
        hit = (pos < len(col_idx)) & (col_idx[pos_c] == doc_rows) if len(col_idx) else np.zeros(len(doc_rows), bool)
        return np.where(hit, col_val[pos_c] if len(col_idx) else 0.0, 0.0)


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k highest positive scores, best first (ties: lower row first)."""
    k = min(k, len(scores))
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    cand = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
    cand = cand[np.lexsort((cand, -scores[cand]))]
    return cand[scores[cand] > 0]


def _csr_from_rows(rows: Sequence[Mapping[int, float]], n_cols: int) -> sp.csr_matrix:
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    for i, r in enumerate(rows):
        indptr[i + 1] = indptr[i] + len(r)
    indices = np.fromiter((t for r in rows for t in r), dtype=np.int32, count=int(indptr[-1]))
    data = np.fromiter((v for r in rows for v in r.values()), dtype=np.float32, count=int(indptr[-1]))
    m = sp.csr_matrix((data, indices, indptr), shape=(len(rows), n_cols))
    m.sort_indices()
    return m


def _resize(m: sp.csr_matrix, n_cols: int) -> sp.csr_matrix:
    if m.shape[1] == n_cols:
        return m
    return sp.csr_matrix((m.data, m.indices, m.indptr), shape=(m.shape[0], n_cols))


class Index:
    """A persisted, incrementally updatable BM25 index with injected-posting fields."""

    def __init__(self, k1: float = DEFAULT_K1, b: float = DEFAULT_B, join_compounds: bool = True):
        self.k1, self.b, self.join_compounds = k1, b, join_compounds
        self.doc_ids: list[str] = []
        self.doc_hashes: list[str] = []
        self.terms: list[str] = []
        self.vocab: dict[str, int] = {}
        self.text_tf = sp.csr_matrix((0, 0), dtype=np.float32)
        self.seq = np.zeros(0, dtype=np.int32)
        self.seq_ptr = np.zeros(1, dtype=np.int64)
        self.fields: dict[str, sp.csr_matrix] = {}
        self.field_meta: dict[str, dict] = {}
        self._row: dict[str, int] = {}
        self._cores: dict[str, SparseBM25] = {}
        self._bigrams: tuple[np.ndarray, np.ndarray] | None = None
        self.version: Path | None = None  # the version folder `load` read (see `save`)

    # ---------------------------------------------------------------- analysis
    def analyze(self, text: str) -> list[str]:
        return analyze(text, self.join_compounds)

    def _term_id(self, term: str) -> int:
        tid = self.vocab.get(term)
        if tid is None:
            tid = self.vocab[term] = len(self.terms)
            self.terms.append(term)
        return tid

    @property
    def n_docs(self) -> int:
        return len(self.doc_ids)

    def row_of(self, doc_id: str) -> int | None:
        return self._row.get(doc_id)

    # ---------------------------------------------------------------- building
    def update(self, docs: Sequence[DocInput]) -> dict:
        """Make the index hold exactly `docs` (in this order); re-analyse changed/new docs only.

        Returns counts: added, changed, unchanged, removed, analysed (= added + changed).
        Injected postings of changed documents are dropped (their enrichment is stale).
        """
        old_row = self._row
        kept_old: list[int] = []      # old row per new position, -1 for newly analysed
        new_rows: list[dict[int, float]] = []
        new_seqs: list[np.ndarray] = []
        stats = {"added": 0, "changed": 0, "unchanged": 0, "removed": 0, "analysed": 0}
        seen = set()
        for d in docs:
            if d.id in seen:
                raise ValueError(f"duplicate document id {d.id!r}")
            seen.add(d.id)
            r = old_row.get(d.id)
            if r is not None and self.doc_hashes[r] == d.hash:
                kept_old.append(r)
                stats["unchanged"] += 1
                continue
            stats["changed" if r is not None else "added"] += 1
            ids = [self._term_id(t) for t in self.analyze(d.text)]
            counts: dict[int, float] = {}
            for t in ids:
                counts[t] = counts.get(t, 0.0) + 1.0
            kept_old.append(-1 - len(new_rows))
            new_rows.append(counts)
            new_seqs.append(np.asarray(ids, dtype=np.int32))
        stats["analysed"] = len(new_rows)
        stats["removed"] = sum(1 for i in self.doc_ids if i not in seen)
        n_terms = len(self.terms)
        sel = np.asarray(kept_old, dtype=np.int64)
        old_part = sel >= 0
        n_old = self.text_tf.shape[0]
        stacked = sp.vstack([_resize(self.text_tf, n_terms), _csr_from_rows(new_rows, n_terms)], format="csr")
        perm = np.where(old_part, sel, n_old + (-1 - sel))
        self.text_tf = stacked[perm] if len(perm) else sp.csr_matrix((0, n_terms), dtype=np.float32)
        # term sequences
        parts = []
        for s in sel:
            if s >= 0:
                parts.append(self.seq[self.seq_ptr[s]:self.seq_ptr[s + 1]])
            else:
                parts.append(new_seqs[-1 - s])
        lens = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
        self.seq_ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        self.seq = np.concatenate(parts).astype(np.int32) if parts else np.zeros(0, np.int32)
        # injected fields: keep rows of unchanged docs, empty rows otherwise
        for name, m in list(self.fields.items()):
            m = _resize(m, n_terms)
            empty = sp.csr_matrix((1, n_terms), dtype=np.float32)
            stacked_f = sp.vstack([m, empty], format="csr")
            self.fields[name] = stacked_f[np.where(old_part, sel, n_old)] if len(sel) else sp.csr_matrix((0, n_terms), dtype=np.float32)
        self.doc_ids = [d.id for d in docs]
        self.doc_hashes = [d.hash for d in docs]
        self._row = {d: i for i, d in enumerate(self.doc_ids)}
        self._invalidate()
        return stats

    @classmethod
    def from_token_ids(cls, tf: sp.csr_matrix, terms: list[str], doc_ids: list[str], **params) -> "Index":
        """An index from an already-counted CSR matrix (used by the 1M-document benchmark)."""
        idx = cls(**params)
        idx.text_tf = sp.csr_matrix(tf, dtype=np.float32)
        idx.terms = list(terms)
        idx.vocab = {t: i for i, t in enumerate(terms)}
        idx.doc_ids = list(doc_ids)
        idx.doc_hashes = [""] * len(doc_ids)
        idx._row = {d: i for i, d in enumerate(doc_ids)}
        idx.seq_ptr = np.zeros(len(doc_ids) + 1, dtype=np.int64)
        return idx

    def _invalidate(self) -> None:
        self._cores.clear()
        self._bigrams = None

    # ---------------------------------------------------------------- injected postings
    def doc_terms(self, row: int) -> np.ndarray:
        """Analysed term ids of one document, in order."""
        return self.seq[self.seq_ptr[row]:self.seq_ptr[row + 1]]

    def _contains_ngram(self, row: int, ids: Sequence[int]) -> bool:
        seq = self.doc_terms(row)
        n = len(ids)
        if n == 0 or len(seq) < n:
            return False
        hits = np.ones(len(seq) - n + 1, dtype=bool)
        for j, t in enumerate(ids):
            hits &= seq[j:len(seq) - n + 1 + j] == t
        return bool(hits.any())

    def set_field(self, name: str, postings: Mapping[str, Sequence[tuple[str, float]]],
                  ngram_max: int = 3, meta: dict | None = None, skip_present: bool = True,
                  combine: str = "max") -> dict:
        """Inject weighted n-gram postings per document: {doc_id: [(phrase, weight), ...]}.

        Each phrase is analysed and decomposed into sliding-window n-grams (1..ngram_max),
        each an atomic token ("heart attack" -> heart, attack, heart_attack). An n-gram that
        already occurs in the document's own text is skipped (enrichment adds only absent
        vocabulary); a token proposed by several phrases keeps its largest weight, which acts
        as its term frequency (combine="sum" adds them instead: SAGE's prepended keywords).
        skip_present=False keeps n-grams already in the text. Stored document text is never
        touched. Returns counts.
        """
        rows: list[dict[int, float]] = [dict() for _ in range(self.n_docs)]
        n_tokens = n_docs = 0
        for doc_id, phrases in postings.items():
            r = self._row.get(doc_id)
            if r is None:
                continue
            acc = rows[r]
            for phrase, weight in phrases:
                if weight <= 0:
                    continue
                parts = self.analyze(phrase)
                for gram in sliding_ngrams(parts, ngram_max):
                    existing = [self.vocab.get(t) for t in gram]
                    if skip_present and all(e is not None for e in existing) and self._contains_ngram(r, existing):
                        continue
                    tid = self._term_id(gram[0] if len(gram) == 1 else ngram_token(gram))
                    if combine == "sum":
                        acc[tid] = acc.get(tid, 0.0) + float(weight)
                    else:
                        acc[tid] = max(acc.get(tid, 0.0), float(weight))
            if acc:
                n_docs += 1
                n_tokens += len(acc)
        n_terms = len(self.terms)
        self.fields[name] = _csr_from_rows(rows, n_terms)
        self.text_tf = _resize(self.text_tf, n_terms)
        for other in self.fields:
            self.fields[other] = _resize(self.fields[other], n_terms)
        self.field_meta[name] = dict(meta or {}, docs=n_docs, postings=n_tokens)
        self._invalidate()
        return {"docs": n_docs, "postings": n_tokens}

    # ---------------------------------------------------------------- statistics
    def view_matrix(self, view: str) -> sp.csr_matrix:
        if view not in VIEWS:
            raise ValueError(f"unknown view {view!r}")
        field = VIEWS[view]
        tf = _resize(self.text_tf, len(self.terms))
        if field and field in self.fields:
            tf = (tf + _resize(self.fields[field], len(self.terms))).tocsr()
        return tf

    def core(self, view: str = "text") -> SparseBM25:
        """The BM25 scorer of a view (built on first use, then cached)."""
        if view not in self._cores:
            self._cores[view] = SparseBM25(self.view_matrix(view), self.k1, self.b)
        return self._cores[view]

    def has_field(self, name: str) -> bool:
        return name in self.fields and self.fields[name].nnz > 0

    def term_df(self, token: str, view: str = "text") -> int:
        tid = self.vocab.get(token)
        if tid is None:
            return 0
        df = self.core(view).df
        return int(df[tid]) if tid < len(df) else 0

    def _bigram_table(self) -> tuple[np.ndarray, np.ndarray]:
        """Sorted unique codes (a * V + b) of adjacent term pairs, with their document counts."""
        if self._bigrams is None:
            V = np.int64(max(len(self.terms), 1))
            seq = self.seq.astype(np.int64)
            doc = np.repeat(np.arange(self.n_docs, dtype=np.int64), np.diff(self.seq_ptr))
            if len(seq) < 2:
                self._bigrams = (np.zeros(0, np.int64), np.zeros(0, np.int64))
                return self._bigrams
            same = doc[:-1] == doc[1:]
            codes = (seq[:-1] * V + seq[1:])[same]
            docs = doc[:-1][same]
            order = np.lexsort((docs, codes))
            codes, docs = codes[order], docs[order]
            first = np.ones(len(codes), dtype=bool)
            first[1:] = (codes[1:] != codes[:-1]) | (docs[1:] != docs[:-1])
            uniq, counts = np.unique(codes[first], return_counts=True)
            self._bigrams = (uniq, counts)
        return self._bigrams

    def text_ngram_df(self, parts: Sequence[str]) -> int:
        """DF of an n-gram in document text: exact for n <= 2, min over its bigrams for n > 2
        (an upper bound, which is the safe side for an upper-bound DF filter)."""
        ids = [self.vocab.get(t) for t in parts]
        if any(i is None for i in ids):
            return 0
        if len(ids) == 1:
            return self.term_df(parts[0], "text")
        uniq, counts = self._bigram_table()
        V = max(len(self.terms), 1)
        best = None
        for a, b in zip(ids[:-1], ids[1:]):
            code = a * V + b
            pos = np.searchsorted(uniq, code)
            c = int(counts[pos]) if pos < len(uniq) and uniq[pos] == code else 0
            best = c if best is None else min(best, c)
        return int(best or 0)

    def df(self, term_or_phrase: str, view: str = "enriched") -> int:
        """The DF tool: in how many documents of `view` a term or phrase occurs.

        Single terms: exact posting count. Phrases: documents whose text contains the phrase
        (see text_ngram_df) plus documents holding its injected atomic token (disjoint, since a
        token is only injected where the phrase is absent from the text).
        """
        parts = self.analyze(term_or_phrase)
        if not parts:
            return 0
        if len(parts) == 1:
            return self.term_df(parts[0], view)
        injected = self.term_df(ngram_token(parts), view) if VIEWS.get(view) else 0
        return self.text_ngram_df(parts) + injected

    # ---------------------------------------------------------------- search
    def search_weighted(self, weights: Mapping[str, float], k: int = 10, view: str = "text"):
        """Top-k (row, score) for a weighted query {token: weight}; unknown tokens ignored."""
        core = self.core(view)
        ids, ws = [], []
        for tok, w in weights.items():
            tid = self.vocab.get(tok)
            if tid is not None:
                ids.append(tid)
                ws.append(w)
        scores = core.score(ids, ws)
        rows = top_k(scores, k)
        return rows, scores[rows]

    def query_weights(self, text: str) -> dict[str, float]:
        """Bag-of-words query: each analysed term weighted by its count."""
        out: dict[str, float] = {}
        for t in self.analyze(text):
            out[t] = out.get(t, 0.0) + 1.0
        return out

    # ---------------------------------------------------------------- persistence
    def save(self, path: Path) -> None:
        """Publish this index at `path` so that a reader always finds a complete index there.

        `path` is a symbolic link to a sibling version folder (`index.v<id>`). A save writes a
        new version folder completely, then replaces the link in one rename (atomic on POSIX):
        a reader sees the old index or the new one, never no index or half of one. Swapping
        folders instead (rename the old one away, rename the new one in) leaves a moment with
        no folder at `path`, and a search in that moment failed with HTTP 500. `Index.load`
        resolves the link once, so it never mixes files of two versions; the version just
        replaced is kept for readers still loading it, older ones are removed (a reader that
        loses its version to several quick saves starts again). Saves to one
        path are serialised by a lock file. A folder left at `path` by an older release is
        moved into a version folder on its first save (the only non-atomic step, once).
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with _save_lock(path):
            version = path.with_name(f"{path.name}.v{uuid.uuid4().hex[:16]}")
            version.mkdir()
            self._write_files(version)
            previous = None
            if path.is_symlink():
                previous = Path(os.readlink(path)).name
            elif path.is_dir():  # a plain folder, as older releases saved it
                previous = path.with_name(f"{path.name}.v{uuid.uuid4().hex[:16]}").name
                os.replace(path, path.with_name(previous))
            link = path.with_name(path.name + ".link")
            if link.is_symlink() or link.exists():
                link.unlink()
            os.symlink(version.name, link)  # relative: the corpus folder may be moved
            os.replace(link, path)
            _remove_stale_versions(path, keep={version.name, previous})

    def _write_files(self, folder: Path) -> None:
        n_terms = len(self.terms)
        arrays = {"seq": self.seq, "seq_ptr": self.seq_ptr}
        for name, m in [("text", self.text_tf)] + [(f"field_{k}", v) for k, v in self.fields.items()]:
            m = _resize(m, n_terms)
            arrays[f"{name}_data"], arrays[f"{name}_indices"], arrays[f"{name}_indptr"] = m.data, m.indices, m.indptr
        np.savez(folder / "arrays.npz", **arrays)
        (folder / "terms.txt").write_text("\n".join(self.terms), encoding="utf-8")
        (folder / "doc_ids.txt").write_text("\n".join(self.doc_ids), encoding="utf-8")
        (folder / "doc_hashes.txt").write_text("\n".join(self.doc_hashes), encoding="utf-8")
        meta = {"format": FORMAT_VERSION, "k1": self.k1, "b": self.b, "join_compounds": self.join_compounds,
                "n_docs": self.n_docs, "n_terms": n_terms, "fields": sorted(self.fields), "field_meta": self.field_meta}
        (folder / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> "Index":
        """Read the index published at `path`. The link is resolved once, so every file comes
        from one version; if saves replaced that version and removed it before the read was
        over, the read starts again from the version the link names now."""
        for _ in range(LOAD_ATTEMPTS - 1):
            version = published_version(path)
            try:
                return cls._load_version(version)
            except FileNotFoundError:
                if published_version(path) == version:
                    raise  # no save replaced it: the index is missing or incomplete
        return cls._load_version(published_version(path))

    @classmethod
    def _load_version(cls, path: Path) -> "Index":
        meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT_VERSION:
            raise ValueError(f"{path}: unsupported index format {meta.get('format')}")
        idx = cls(k1=meta["k1"], b=meta["b"], join_compounds=meta["join_compounds"])

        def lines(name: str) -> list[str]:
            raw = (path / name).read_text(encoding="utf-8")
            return raw.split("\n") if raw else []

        idx.terms = lines("terms.txt")
        idx.vocab = {t: i for i, t in enumerate(idx.terms)}
        idx.doc_ids = lines("doc_ids.txt")
        idx.doc_hashes = lines("doc_hashes.txt")
        idx._row = {d: i for i, d in enumerate(idx.doc_ids)}
        shape = (len(idx.doc_ids), len(idx.terms))
        with np.load(path / "arrays.npz") as z:
            idx.seq, idx.seq_ptr = z["seq"], z["seq_ptr"]

            def mat(name):
                return sp.csr_matrix((z[f"{name}_data"], z[f"{name}_indices"], z[f"{name}_indptr"]), shape=shape)

            idx.text_tf = mat("text")
            for f in meta["fields"]:
                idx.fields[f] = mat(f"field_{f}")
        idx.field_meta = meta.get("field_meta", {})
        idx.version = path
        return idx


def published_version(path: Path) -> Path:
    """The version folder that the link at `path` names, read in one `readlink` (a path walk
    such as `Path.resolve` can be overtaken by a save between two steps); `path` itself when
    it is a plain folder (saved by an older release). FileNotFoundError when nothing is there."""
    path = Path(path)
    try:
        return path.parent / os.readlink(path)
    except OSError as exc:
        if exc.errno == errno.EINVAL:  # not a link
            return path
        raise


@contextmanager
def _save_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on `path`'s lock file, across processes (the CLI ingests and enriches
    while the server reads)."""
    with open(path.with_name(path.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _remove_stale_versions(path: Path, keep: set[str | None]) -> None:
    """Remove version folders of `path` other than `keep`, and the `.tmp`/`.old` folders older
    releases used. Runs under the save lock, so no other save is writing one."""
    for sibling in path.parent.glob(f"{path.name}.*"):
        stale_version = sibling.name.startswith(f"{path.name}.v") and sibling.name not in keep
        if (stale_version or sibling.name in {f"{path.name}.tmp", f"{path.name}.old"}) and sibling.is_dir() \
                and not sibling.is_symlink():
            shutil.rmtree(sibling, ignore_errors=True)


def bag(tokens: Iterable[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for t in tokens:
        out[t] = out.get(t, 0.0) + 1.0
    return out
