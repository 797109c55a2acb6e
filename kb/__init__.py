"""Knowledge-base retrieval over named document corpora (issue 5).

BM25 over a precomputed sparse matrix, with weighted queries, a document-frequency ("DF")
tool, LLM vocabulary enrichment on the corpus side (SIRA sec. 3.2, SAGE sec. 5) and on the
query side, RM3 pseudo-relevance feedback, BEIR-style evaluation, a Flask blueprint and a
click command group. Text goes through `lexicon.text`, the project's single text pipeline.
"""
from kb.index import Index, SparseBM25
from kb.store import CorpusStore, IngestError

__all__ = ["Index", "SparseBM25", "CorpusStore", "IngestError"]
