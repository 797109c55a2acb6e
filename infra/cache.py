"""The disk cache (diskcache, SQLite underneath) opened so that a damaged one never stops a start.

The cache holds only what can be computed again (embeddings, LLM answers), so a cache file that
SQLite cannot read (corrupted by a crash, a full disk or a person) is moved aside, with a
warning, and an empty cache takes its place. Errors while serving are the callers' to absorb
(search.embeddings.CachedEmbedder, rerank.cache): they treat them as misses.
"""
from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path

import diskcache

log = logging.getLogger(__name__)


def open_disk_cache(directory: Path) -> diskcache.Cache:
    """diskcache.Cache at `directory`, created if missing, replaced if unreadable."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    try:
        return diskcache.Cache(str(directory))
    except sqlite3.DatabaseError as exc:
        aside = directory.with_name(f"{directory.name}.corrupt-{int(time.time())}")
        directory.rename(aside)
        log.warning("cache %s is unreadable (%s); moved to %s and started empty", directory, exc, aside)
        directory.mkdir(parents=True)
        return diskcache.Cache(str(directory))
