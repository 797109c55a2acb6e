"""The disk cache (diskcache, SQLite underneath), made to survive damage by itself.

The cache holds only what can be computed again (embeddings, LLM answers), so damage is never
worth an error or a manual step:

- at start, a cache file SQLite cannot read (corrupted by a crash, a full disk or a person) is
  moved aside (`<dir>.corrupt-<time>`, with a warning) and an empty cache takes its place;
- while serving, `HealingCache` does the same the first time an operation fails with a SQLite
  database error (the directory was deleted under the running process: "no such table"; the
  file was overwritten: "file is not a database"), then retries the operation once on the fresh
  cache; and it reopens when its file is no longer the one it opened (deleted or replaced;
  checked once a second: connections opened before a deletion keep working on the deleted
  file without an error, unshared and lost at exit). Several processes sharing the directory each reopen it; only the first moves it aside.

Anything else (a full disk, a second failure) still raises, for the callers to treat as a miss
(search.embeddings.CachedEmbedder, rerank.cache.RerankCache).
"""
from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable

import diskcache

log = logging.getLogger(__name__)

#: At most one reopen per this many seconds and process (a disk that stays broken costs little).
REOPEN_INTERVAL_S = 5.0
#: How often (seconds) a process checks that its cache file still exists: a connection opened
#: before the directory was deleted keeps writing to the deleted file without any error.
PRESENCE_CHECK_S = 1.0


def open_disk_cache(directory: Path) -> diskcache.Cache:
    """diskcache.Cache at `directory`, created if missing, replaced if unreadable."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    try:
        return diskcache.Cache(str(directory))
    except sqlite3.DatabaseError as exc:
        aside = directory.with_name(f"{directory.name}.corrupt-{time.time_ns()}")
        directory.rename(aside)
        log.warning("cache %s is unreadable (%s); moved to %s and started empty", directory, exc, aside)
        directory.mkdir(parents=True, exist_ok=True)
        return diskcache.Cache(str(directory))


class HealingCache:
    """A diskcache.Cache (get, set, `in`; anything else passes through) that reopens itself
    when its files turn out to be gone or unreadable (see the module docstring)."""

    def __init__(self, directory: Path, clock: Callable[[], float] = time.monotonic):
        self.directory = Path(directory)
        self._clock = clock
        self._cache = self._open_checked()
        self._lock = threading.Lock()
        self._reopened_at = float("-inf")
        self._checked_at = self._clock()

    def get(self, key: Any, default: Any = None, **options: Any) -> Any:
        return self._call(lambda cache: cache.get(key, default, **options))

    def set(self, key: Any, value: Any, **options: Any) -> bool:
        return self._call(lambda cache: cache.set(key, value, **options))

    def __contains__(self, key: Any) -> bool:
        return self._call(lambda cache: key in cache)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cache, name)

    def _call(self, operation: Callable[[diskcache.Cache], Any]) -> Any:
        cache = self._cache
        if self._clock() - self._checked_at >= PRESENCE_CHECK_S:
            self._checked_at = self._clock()
            if self._file_identity() != self._identity:  # deleted or replaced since we opened it
                self._reopen(cache, FileNotFoundError(f"{self.directory / 'cache.db'} is not the file opened"))
                cache = self._cache
        try:
            return operation(cache)
        except sqlite3.DatabaseError as exc:
            if not self._reopen(cache, exc):
                raise
        return operation(self._cache)

    def _reopen(self, broken: diskcache.Cache, error: Exception) -> bool:
        """Replace `broken` with a freshly opened cache; False when that is not tried now."""
        with self._lock:
            if self._cache is not broken:
                return True  # another thread already did
            if self._clock() - self._reopened_at < REOPEN_INTERVAL_S:
                return False
            self._reopened_at = self._clock()
            log.warning("cache %s failed (%s: %s); reopening it", self.directory, type(error).__name__, error)
            try:
                broken.close()
            except Exception:  # noqa: BLE001 - closing a broken cache may fail too; it is dropped anyway
                pass
            try:
                self._cache = self._open_checked()
            except (OSError, sqlite3.Error) as exc:
                log.warning("cache %s could not be reopened: %s", self.directory, exc)
                return False
            return True

    def _file_identity(self) -> tuple[int, int] | None:
        try:
            info = os.stat(self.directory / "cache.db")
        except OSError:
            return None
        return info.st_dev, info.st_ino

    def _open_checked(self) -> diskcache.Cache:
        """A cache that answers: opened, probed with a read, moved aside if still unreadable
        (a file overwritten in place can open and fail only at the first read)."""
        cache = open_disk_cache(self.directory)
        try:
            cache.get("__probe__")
        except sqlite3.DatabaseError:
            cache.close()
            aside = self.directory.with_name(f"{self.directory.name}.corrupt-{time.time_ns()}")
            self.directory.rename(aside)
            log.warning("cache %s unreadable; moved to %s", self.directory, aside)
            cache = open_disk_cache(self.directory)
        self._identity = self._file_identity()
        return cache


def copy_cache(source: Path, target: Path) -> None:
    """A consistent copy at `target` (a new directory) of the cache at `source`, which this and
    other processes may be using, through SQLite's online backup. Never a file copy: closing a
    descriptor a process opened on a database's files drops every POSIX lock that process holds
    on them, SQLite's own included (sqlite.org/howtocorrupt.html, 2.2), and a live WAL database
    copied file by file may not be consistent. Measured: the test suite's file copy of the shared
    cache, from a worker that had it open, left it "database disk image is malformed" for the
    other worker (moved aside; every later fit embedded its queries again)."""
    source, target = Path(source), Path(target)
    target.mkdir(parents=True)
    source_db, target_db = sqlite3.connect(source / "cache.db"), sqlite3.connect(target / "cache.db")
    try:
        source_db.backup(target_db)
    finally:
        source_db.close()
        target_db.close()
    # the values diskcache keeps as files beside its database (embeddings are too small for that)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("cache.db*"), dirs_exist_ok=True)
