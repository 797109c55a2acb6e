"""Bookkeeping of prometheus_client's multiprocess mode: a fresh directory at start and each
dead worker's live gauges removed (both from the gunicorn master, ops/gunicorn.conf.py), and,
at every scrape, the live gauges of any other process that is gone.
"""
from __future__ import annotations

import os
import re
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


_LIVE_GAUGE_FILE = re.compile(r"^gauge_live\w+_(\d+)\.db$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def drop_dead_processes(directory: Path) -> None:
    """Drop the live gauges of processes that are gone although gunicorn never reported them:
    a CLI command (`python app.py fit`) run with PROMETHEUS_MULTIPROC_DIR in its environment
    writes gauges too, and its zeros would otherwise stay in /metrics (an index "built" in 1970)."""
    pids = {int(m.group(1)) for path in directory.glob("gauge_live*.db") if (m := _LIVE_GAUGE_FILE.match(path.name))}
    for pid in pids:
        if not _alive(pid):
            worker_exited(directory, pid)
