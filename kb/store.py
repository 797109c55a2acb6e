"""Named corpora on disk: settings.data_dir / "corpora" / NAME.

Layout of a corpus folder:
  documents.jsonl        {"id", "title", "text", "hash", "metadata"?} one per line (the source of truth)
  queries/SPLIT.jsonl    {"_id", "text"} (BEIR queries*.jsonl, copied as given)
  qrels/SPLIT.tsv        query-id <TAB> corpus-id <TAB> score (BEIR)
  index -> index.v<id>/   the persisted BM25 index (kb.index.Index; a link to its current version)
  manifest.json          name, counts, sources, last ingest stats

Ingest validates every row first and writes nothing unless all rows are valid (errors carry
line numbers). Re-ingesting upserts by id: only documents whose content hash changed are
re-analysed by the index; `replace=True` also removes documents absent from the input.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from infra.rows import RowRefused, all_or_nothing
from kb.index import DEFAULT_B, DEFAULT_K1, DocInput, Index

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MAX_ERRORS_SHOWN = 20
_BAD_ID = re.compile(r"[\x00-\x1f\x7f]")


class IngestError(ValueError):
    """Input rejected; `.errors` lists "file:line: reason" strings."""

    def __init__(self, errors: list[str]):
        self.errors = errors
        shown = errors[:MAX_ERRORS_SHOWN]
        more = f"\n... and {len(errors) - len(shown)} more" if len(errors) > len(shown) else ""
        super().__init__(f"{len(errors)} invalid row(s), nothing ingested:\n" + "\n".join(shown) + more)


class CorpusNotFound(KeyError):
    pass


@dataclass
class Document:
    id: str
    title: str
    text: str
    metadata: dict = field(default_factory=dict)

    @property
    def content(self) -> str:
        """What the index analyses: title and text."""
        return f"{self.title}\n{self.text}" if self.title else self.text

    @property
    def hash(self) -> str:
        payload = json.dumps([self.title, self.text, self.metadata], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]

    def to_row(self) -> dict:
        row = {"id": self.id, "title": self.title, "text": self.text, "hash": self.hash}
        if self.metadata:
            row["metadata"] = self.metadata
        return row


def validate_name(name: str) -> str:
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ValueError(f"invalid corpus name {name!r}: letters, digits, '_', '.', '-' (max 64)")
    return name


def parse_documents(path: Path) -> list[Document]:
    """Read BEIR corpus.jsonl or plain JSONL ({"id"|"_id", "title"?, "text"}); all-or-nothing
    (infra.rows.all_or_nothing): IngestError with every line's problem, or every document."""
    with open(path, encoding="utf-8", errors="strict") as fh:
        try:
            lines = list(fh)
        except UnicodeDecodeError as exc:
            raise IngestError([f"{path}: not UTF-8 ({exc})"]) from exc

    def read(n: int, line: str) -> Document:
        where = f"{path.name}:{n}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RowRefused(f"{where}: invalid JSON ({exc.msg})") from exc
        if not isinstance(row, dict):
            raise RowRefused(f"{where}: expected a JSON object")
        raw_id = row.get("_id", row.get("id"))
        if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)) or str(raw_id).strip() == "":
            raise RowRefused(f"{where}: missing or invalid id (\"_id\" or \"id\": non-empty string)")
        doc_id = str(raw_id)
        if _BAD_ID.search(doc_id) or len(doc_id) > 200:
            raise RowRefused(f"{where}: id {doc_id[:40]!r} has control characters or is over 200 chars")
        title = row.get("title", "")
        text = row.get("text")
        if title is None:
            title = ""
        if not isinstance(title, str):
            raise RowRefused(f"{where}: \"title\" must be a string")
        if not isinstance(text, str):
            raise RowRefused(f"{where}: missing \"text\" string")
        if not (title.strip() or text.strip()):
            raise RowRefused(f"{where}: empty title and text")
        metadata = row.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise RowRefused(f"{where}: \"metadata\" must be an object")
        return Document(doc_id, title, text, metadata)

    docs, errors = all_or_nothing(((n, line) for n, line in enumerate(lines, 1) if line.strip()), read,
                                  key=lambda doc: doc.id, duplicate=lambda n, doc, first: (
                                      f"{path.name}:{n}: duplicate id {doc.id!r} (first on line {first})"))
    if errors:
        raise IngestError(errors)
    if not docs:
        raise IngestError([f"{path.name}: no documents"])
    return docs


def parse_queries(path: Path) -> list[dict]:
    errors, out = [], []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            qid, text = str(row.get("_id", row.get("id"))), row["text"]
            if row.get("_id", row.get("id")) is None or not isinstance(text, str):
                raise ValueError
            out.append({"_id": qid, "text": text})
        except (ValueError, KeyError, TypeError, AttributeError):
            errors.append(f"{path.name}:{n}: expected {{\"_id\", \"text\"}}")
    if errors:
        raise IngestError(errors)
    return out


def parse_qrels(path: Path) -> dict[str, dict[str, int]]:
    errors: list[str] = []
    qrels: dict[str, dict[str, int]] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        cols = line.rstrip("\n").split("\t") if "\t" in line else line.split()
        if n == 1 and cols[0].lower() in {"query-id", "qid", "query_id"}:
            continue
        if len(cols) == 4:  # TREC: qid Q0 docid rel
            cols = [cols[0], cols[2], cols[3]]
        try:
            qid, did, rel = cols[0], cols[1], int(cols[2])
        except (IndexError, ValueError):
            errors.append(f"{path.name}:{n}: expected query-id, corpus-id, integer score")
            continue
        qrels.setdefault(qid, {})[did] = rel
    if errors:
        raise IngestError(errors)
    return qrels


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


class CorpusStore:
    """All named corpora under one data directory."""

    def __init__(self, data_dir: Path):
        self.root = Path(data_dir) / "corpora"

    def path(self, name: str) -> Path:
        return self.root / validate_name(name)

    def names(self) -> list[str]:
        if not self.root.exists():
            return []
        return sorted(p.name for p in self.root.iterdir() if (p / "documents.jsonl").exists())

    def exists(self, name: str) -> bool:
        try:
            return (self.path(name) / "documents.jsonl").exists()
        except ValueError:
            return False

    def require(self, name: str) -> Path:
        if not self.exists(name):
            raise CorpusNotFound(name)
        return self.path(name)

    def documents(self, name: str) -> list[Document]:
        out = []
        with open(self.require(name) / "documents.jsonl", encoding="utf-8") as fh:
            for line in fh:
                r = json.loads(line)
                out.append(Document(r["id"], r.get("title", ""), r["text"], r.get("metadata") or {}))
        return out

    def manifest(self, name: str) -> dict:
        p = self.require(name) / "manifest.json"
        return json.loads(p.read_text(encoding="utf-8")) if p.exists() else {}

    def index_path(self, name: str) -> Path:
        return self.path(name) / "index"

    def load_index(self, name: str) -> Index:
        return Index.load(self.require(name) / "index")

    def splits(self, name: str) -> dict[str, tuple[Path | None, Path | None]]:
        """{split: (queries path, qrels path)} of what was ingested with the corpus."""
        base = self.require(name)
        out: dict[str, list] = {}
        for q in sorted((base / "queries").glob("*.jsonl")):
            out.setdefault(q.stem, [None, None])[0] = q
        for r in sorted((base / "qrels").glob("*.tsv")):
            out.setdefault(r.stem, [None, None])[1] = r
        return {k: (v[0], v[1]) for k, v in out.items()}

    def ingest(self, name: str, beir_dir: Path | None = None, jsonl: Path | None = None,
               replace: bool = False, k1: float | None = None, b: float | None = None,
               join_compounds: bool | None = None) -> dict:
        """Validate the input fully, then upsert documents and update the index incrementally."""
        base = self.path(name)
        if (beir_dir is None) == (jsonl is None):
            raise ValueError("give exactly one of a BEIR directory or a JSONL file")
        extra_files: dict[str, str] = {}
        if beir_dir is not None:
            beir_dir = Path(beir_dir)
            corpus_file = beir_dir / "corpus.jsonl"
            if not corpus_file.exists():
                raise IngestError([f"{beir_dir}: no corpus.jsonl"])
            new_docs = parse_documents(corpus_file)
            for q in sorted(beir_dir.glob("queries*.jsonl")):
                parse_queries(q)
                split = q.stem.split(".", 1)[1] if "." in q.stem else "all"
                extra_files[f"queries/{split}.jsonl"] = q.read_text(encoding="utf-8")
            for r in sorted((beir_dir / "qrels").glob("*.tsv")) if (beir_dir / "qrels").is_dir() else []:
                parse_qrels(r)
                extra_files[f"qrels/{r.stem}.tsv"] = r.read_text(encoding="utf-8")
            source = str(beir_dir)
        else:
            new_docs = parse_documents(Path(jsonl))
            source = str(jsonl)
        # merge (upsert by id, keep existing order, append new ones)
        existing = self.documents(name) if self.exists(name) else []
        incoming = {d.id: d for d in new_docs}
        merged: list[Document] = []
        for d in existing:
            if d.id in incoming:
                merged.append(incoming.pop(d.id))
            elif not replace:
                merged.append(d)
        merged.extend(d for d in new_docs if d.id in incoming)
        started = time.perf_counter()
        index_dir = base / "index"
        if index_dir.exists():
            index = Index.load(index_dir)
        else:
            index = Index(k1=DEFAULT_K1 if k1 is None else k1, b=DEFAULT_B if b is None else b,
                          join_compounds=True if join_compounds is None else join_compounds)
        if k1 is not None:
            index.k1 = k1
        if b is not None:
            index.b = b
        if join_compounds is not None and join_compounds != index.join_compounds:
            index = Index(k1=index.k1, b=index.b, join_compounds=join_compounds)  # full re-analysis
        stats = index.update([DocInput(d.id, d.hash, d.content) for d in merged])
        # write: files first, index last (the index records doc hashes, so a crash in between
        # only means the next ingest re-analyses a few documents)
        _atomic_write(base / "documents.jsonl",
                      "".join(json.dumps(d.to_row(), ensure_ascii=False) + "\n" for d in merged))
        for rel, text in extra_files.items():
            _atomic_write(base / rel, text)
        index.save(index_dir)
        stats.update(documents=len(merged), seconds=round(time.perf_counter() - started, 3))
        manifest = {"name": name, "documents": len(merged), "source": source, "last_ingest": stats,
                    "updated": time.strftime("%Y-%m-%dT%H:%M:%S"), "splits": sorted(self.splits(name))}
        _atomic_write(base / "manifest.json", json.dumps(manifest, indent=1))
        return stats
