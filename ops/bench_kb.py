"""Benchmark the kb BM25 engine (issue 5). Medians and ratios, not pass/fail tests.

    .venv/bin/python ops/bench_kb.py --scifact ../shared/data/scifact            # both parts
    .venv/bin/python ops/bench_kb.py --skip-scifact --docs 1000000               # synthetic only

Part 1, SciFact (5,183 docs): build time, save/load time, per-query latency (median, p95) of
the weighted BM25 call alone and end to end (analysis + scoring + top-100), against
rank-bm25 (BM25Okapi.get_scores over the same tokens) and bm25s as ratios. Target < 2 ms.
Part 2, synthetic corpus (default 1M docs): Zipfian vocabulary, token ids generated in chunks,
counted into CSR, BM25 weights precomputed; prints index time, peak RSS and query latency
(median, p95) for 2-8-term queries drawn from the Zipf tail past the 100 most frequent terms
(the role stopword removal plays on real text). Target < 50 ms per query.
"""
from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kb.index import DocInput, Index  # noqa: E402
from kb.store import parse_documents, parse_queries  # noqa: E402


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pct(xs, p) -> float:
    return float(np.percentile(np.asarray(xs) * 1000, p))


def bench_scifact(folder: Path, rank_bm25_queries: int) -> dict:
    docs = parse_documents(folder / "corpus.jsonl")
    queries = [q["text"] for q in parse_queries(folder / "queries.train.jsonl")]
    out: dict = {"docs": len(docs), "queries": len(queries)}
    t = time.perf_counter()
    idx = Index()
    idx.update([DocInput(d.id, d.hash, d.content) for d in docs])
    out["analyse_s"] = time.perf_counter() - t
    t = time.perf_counter()
    idx.core("text")
    out["weights_s"] = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        idx.save(Path(tmp) / "index")
        out["save_s"] = time.perf_counter() - t
        t = time.perf_counter()
        loaded = Index.load(Path(tmp) / "index")
        loaded.core("text")
        out["load_and_weights_s"] = time.perf_counter() - t
    qw = [idx.query_weights(q) for q in queries]
    core_only, e2e = [], []
    for q, w in zip(queries, qw):
        t = time.perf_counter()
        idx.search_weighted(w, 100)
        core_only.append(time.perf_counter() - t)
        t = time.perf_counter()
        idx.search_weighted(idx.query_weights(q), 100)
        e2e.append(time.perf_counter() - t)
    out["query_ms_median"], out["query_ms_p95"] = pct(core_only, 50), pct(core_only, 95)
    out["e2e_ms_median"], out["e2e_ms_p95"] = pct(e2e, 50), pct(e2e, 95)
    # rank-bm25 over identical tokens (it scans all docs in Python per query term)
    from rank_bm25 import BM25Okapi

    tokens = [[idx.terms[t] for t in idx.doc_terms(r)] for r in range(idx.n_docs)]
    t = time.perf_counter()
    rb = BM25Okapi(tokens, k1=0.9, b=0.4)
    out["rank_bm25_build_s"] = time.perf_counter() - t
    rb_times = []
    for w in qw[:rank_bm25_queries]:
        t = time.perf_counter()
        scores = rb.get_scores(list(w))
        np.argpartition(-scores, 100)[:100]
        rb_times.append(time.perf_counter() - t)
    out["rank_bm25_ms_median"] = pct(rb_times, 50)
    out["speedup_vs_rank_bm25"] = out["rank_bm25_ms_median"] / out["query_ms_median"]
    try:
        import bm25s

        t = time.perf_counter()
        r = bm25s.BM25(method="lucene", k1=0.9, b=0.4)
        r.index(tokens, show_progress=False)
        out["bm25s_build_s"] = time.perf_counter() - t
        bt = []
        for w in qw:
            toks = [t for t in w if t in r.vocab_dict]
            t = time.perf_counter()
            r.get_scores(toks)
            bt.append(time.perf_counter() - t)
        out["bm25s_get_scores_ms_median"] = pct(bt, 50)
    except Exception as exc:  # noqa: BLE001 - optional comparison
        out["bm25s_error"] = f"{type(exc).__name__}: {exc}"
    return out


def zipf_sampler(vocab: int, s: float, rng):
    p = 1.0 / np.arange(1, vocab + 1) ** s
    cdf = np.cumsum(p / p.sum())
    return lambda n: np.minimum(np.searchsorted(cdf, rng.random(n)), vocab - 1).astype(np.int32)


def bench_synthetic(n_docs: int, vocab: int, mean_len: int, n_queries: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    sample = zipf_sampler(vocab, 1.07, rng)
    out: dict = {"docs": n_docs, "vocab": vocab, "mean_doc_len": mean_len, "rss_start_mb": peak_rss_mb()}
    t0 = time.perf_counter()
    chunks = []
    chunk = 100_000
    for lo in range(0, n_docs, chunk):
        n = min(chunk, n_docs - lo)
        lens = np.maximum(1, rng.poisson(mean_len, n))
        toks = sample(int(lens.sum()))
        rows = np.repeat(np.arange(n, dtype=np.int32), lens)
        m = sp.csr_matrix((np.ones(len(toks), np.float32), (rows, toks)), shape=(n, vocab))
        m.sum_duplicates()
        chunks.append(m)
    tf = sp.vstack(chunks, format="csr")
    del chunks
    out["generate_and_count_s"] = time.perf_counter() - t0
    out["nnz"] = int(tf.nnz)
    t = time.perf_counter()
    idx = Index.from_token_ids(tf, [f"t{i}" for i in range(vocab)], [f"d{i}" for i in range(n_docs)])
    del tf
    core = idx.core("text")
    out["index_s"] = time.perf_counter() - t
    out["index_mb"] = (core.weights.data.nbytes + core.weights.indices.nbytes + core.weights.indptr.nbytes
                       + idx.text_tf.data.nbytes + idx.text_tf.indices.nbytes + idx.text_tf.indptr.nbytes) / 2**20
    qsample = zipf_sampler(vocab - 100, 1.07, rng)
    times, postings = [], []
    for _ in range(n_queries):
        terms = (qsample(int(rng.integers(2, 9))) + 100).tolist()
        w = {f"t{t}": 1.0 for t in terms}
        postings.append(int(core.df[terms].sum()))
        t = time.perf_counter()
        idx.search_weighted(w, 100)
        times.append(time.perf_counter() - t)
    out["query_ms_median"], out["query_ms_p95"] = pct(times, 50), pct(times, 95)
    out["postings_per_query_median"] = float(np.median(postings))
    out["peak_rss_mb"] = peak_rss_mb()
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scifact", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/scifact")
    ap.add_argument("--skip-scifact", action="store_true")
    ap.add_argument("--skip-synthetic", action="store_true")
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--vocab", type=int, default=500_000)
    ap.add_argument("--mean-len", type=int, default=60)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rank-bm25-queries", type=int, default=100)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    report: dict = {}
    if not args.skip_scifact:
        report["scifact"] = r = bench_scifact(args.scifact, args.rank_bm25_queries)
        print(f"SciFact {r['docs']} docs: analyse {r['analyse_s']:.2f}s, weights {r['weights_s']*1000:.0f} ms, "
              f"save {r['save_s']*1000:.0f} ms, load+weights {r['load_and_weights_s']*1000:.0f} ms")
        print(f"  weighted BM25 top-100: median {r['query_ms_median']:.3f} ms, p95 {r['query_ms_p95']:.3f} ms; "
              f"with analysis: median {r['e2e_ms_median']:.3f} ms, p95 {r['e2e_ms_p95']:.3f} ms")
        print(f"  rank-bm25 median {r['rank_bm25_ms_median']:.2f} ms -> kb is {r['speedup_vs_rank_bm25']:.0f}x faster; "
              f"bm25s get_scores median {r.get('bm25s_get_scores_ms_median', float('nan')):.3f} ms")
    if not args.skip_synthetic:
        report["synthetic"] = r = bench_synthetic(args.docs, args.vocab, args.mean_len, args.queries)
        print(f"Synthetic {r['docs']:,} docs, vocab {r['vocab']:,}, {r['nnz']:,} postings: generate+count "
              f"{r['generate_and_count_s']:.1f}s, index {r['index_s']:.1f}s, index arrays {r['index_mb']:.0f} MiB, "
              f"peak RSS {r['peak_rss_mb']:.0f} MiB")
        print(f"  query (2-8 terms, median {r['postings_per_query_median']:,.0f} postings): median "
              f"{r['query_ms_median']:.2f} ms, p95 {r['query_ms_p95']:.2f} ms")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
