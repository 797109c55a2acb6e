"""Bookkeeping of prometheus_client's multiprocess mode, called from the gunicorn master
(ops/gunicorn.conf.py): a fresh directory at start, and each dead worker's live gauges removed.
"""
from __future__ import annotations

from pathlib import Path

from prometheus_client import multiprocess


def prepare_directory(directory: Path) -> int:
    """Create `directory`, or empty it of the sample files of an earlier run: counters left by
    workers of a previous start would otherwise be added to the new ones (and gauges of pids
    that no longer exist would linger). Only prometheus_client's `*.db` files are removed, so a
    mistyped PROMETHEUS_MULTIPROC_DIR pointing at a real directory loses nothing else.
    Returns how many files were removed."""
    directory.mkdir(parents=True, exist_ok=True)
    stale = list(directory.glob("*.db"))
    for path in stale:
        path.unlink(missing_ok=True)
    return len(stale)


def worker_exited(directory: Path, pid: int) -> None:
    """Drop the `live*` gauges of a worker that exited; its counters and histograms stay in
    the sums (a restart must not make request totals go down)."""
    multiprocess.mark_process_dead(pid, str(directory))
