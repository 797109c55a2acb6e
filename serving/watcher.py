"""RevisionWatcher: one daemon thread per process that polls the store revision.

Every serving process (a gunicorn worker, `python app.py serve`, a second host) must notice a
change published by any other process sharing the database, without a restart and without a
database read on every request. The watcher reads the revision every REVISION_POLL_S seconds and
hands each value to a callback (SearchService._observe_revision), which starts a background
index rebuild when it moved; requests only read the value the callback stored in memory.

Lifecycle:
- `ensure_running()` starts the thread, lazily, in the process that calls it. It is fork-safe:
  a thread started in a parent does not exist in a forked child (gunicorn forks its workers),
  so a child that calls `ensure_running()` starts its own (an at-fork hook forgets the parent's thread there).
- `stop()` ends it cleanly (gunicorn's worker_exit hook calls it).
- The callback is held weakly when it is a bound method: once its owner is garbage (tests
  build many short-lived services), the thread ends at its next poll instead of living on.
- A failed read (the database is down or restarting) is logged once per outage, remembered in
  `last_error`, and retried at the next poll; the callback is simply not called meanwhile.
"""
from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from typing import Callable

log = logging.getLogger(__name__)


class RevisionWatcher:
    def __init__(self, read: Callable[[], int], on_revision: Callable[[int], None], interval_s: float,
                 name: str = "revision-watcher"):
        self.read = read
        self._callback = weakref.WeakMethod(on_revision) if hasattr(on_revision, "__self__") else (lambda: on_revision)
        self.interval_s = interval_s
        self.name = name
        self.last_error: str | None = None      # the error of the latest poll, None when it succeeded
        self.last_success: float | None = None  # time.monotonic() of the latest successful poll
        self._thread: threading.Thread | None = None
        self._pid: int | None = None
        self._stop = threading.Event()
        self._start_lock = threading.Lock()
        self._running = False
        os.register_at_fork(after_in_child=_forgotten_in_child(weakref.ref(self)))

    def running(self) -> bool:
        """Whether this process has a live watcher thread (a parent's thread does not count). A
        flag the thread clears as it ends and a forked child clears at once (os.register_at_fork),
        not `os.getpid()` and `thread.is_alive()`: every search asks, twice (serving.service.live)."""
        return self._running

    def ensure_running(self) -> None:
        """Start the polling thread in this process unless it already runs here."""
        if self.running():
            return
        with self._start_lock:
            if self.running():
                return
            self._stop = threading.Event()
            self._pid = os.getpid()
            self._thread = threading.Thread(target=self._run, args=(self._stop,), name=self.name, daemon=True)
            self._running = True
            self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop polling and wait for the thread to end (at most `timeout_s`)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread() and self._pid == os.getpid():
            thread.join(timeout_s)

    def poll_once(self) -> bool:
        """One poll: read the revision and report it. Returns False once the callback's owner is
        gone (the thread then ends); a failed read is logged on the first failure of an outage."""
        callback = self._callback()
        if callback is None:
            return False
        try:
            revision = self.read()
        except Exception as exc:  # the database is down or restarting: keep serving, retry
            if self.last_error is None:
                log.warning("store revision poll failed (%s: %s); serving the current index, retrying every %.1f s",
                            type(exc).__name__, exc, self.interval_s)
            self.last_error = f"{type(exc).__name__}: {exc}"
            return True
        if self.last_error is not None:
            log.info("store revision poll recovered at revision %s", revision)
        self.last_error, self.last_success = None, time.monotonic()
        try:
            callback(revision)
        except Exception:  # a callback bug must not end the watcher
            log.exception("revision callback failed for revision %s", revision)
        return True

    def _run(self, stop: threading.Event) -> None:
        try:
            while not stop.wait(self.interval_s):
                if not self.poll_once():
                    return
        finally:
            if self._stop is stop:   # not a newer thread's flag (stop() then ensure_running())
                self._running = False


def _forgotten_in_child(ref: "weakref.ReferenceType[RevisionWatcher]") -> Callable[[], None]:
    """The at-fork hook of one watcher, held weakly: in a forked child the parent's thread does
    not exist, so the child's watcher is not running until the child starts its own."""
    def forget() -> None:
        watcher = ref()
        if watcher is not None:
            watcher._running = False
            watcher._start_lock = threading.Lock()
    return forget
