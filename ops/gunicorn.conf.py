"""gunicorn configuration: Taskfinder's production server, several worker processes.

    gunicorn -c ops/gunicorn.conf.py            # the app is app:create_app() (wsgi_app below)
    make serve-prod                             # the same, with PROMETHEUS_MULTIPROC_DIR set

Everything comes from the typed Settings (settings.py): HOST, PORT, WEB_CONCURRENCY (workers),
WEB_THREADS, WEB_TIMEOUT_S, PROMETHEUS_MULTIPROC_DIR; gunicorn's own command-line flags still
override them (e.g. `--workers 4`). Each worker builds its own search index before it takes
requests (post_worker_init), so the first search on a new worker is not the slow one, and
starts its own store-revision watcher thread there (serving.watcher: started in the worker after
the fork, never in the master) that picks up edits published by any process; worker_exit stops it.

PROMETHEUS_MULTIPROC_DIR must be in the environment of the gunicorn command itself (not set
here): prometheus_client decides at import time whether to write samples to that directory.
"""
import gc
import os
import sys
from pathlib import Path

# One BLAS thread per worker unless the operator says otherwise, set before numpy loads: a query's
# products are small, and workers already use every core; with 2 OpenBLAS threads per process the
# prefilter's wall p50 was 17-41 ms under load against 2-3 ms with one (ops/bench_scale.py
# --blas-threads, docs/design/performance.md).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from infra import multiprocess  # noqa: E402
from infra.secret_key import key_path, shared_secret_key  # noqa: E402
from settings import Settings  # noqa: E402

_settings = Settings.from_env()

wsgi_app = "app:create_app()"
chdir = str(ROOT)
bind = [f"{_settings.host}:{_settings.port}"]
workers = _settings.web_workers
worker_class = "gthread"   # threads: a request waiting on the LLM must not block its worker
threads = _settings.web_threads
timeout = _settings.web_timeout_s
graceful_timeout = 30
errorlog = "-"
loglevel = "info"


def on_starting(server):
    """In the master, before any worker: a clean multiprocess directory, and warnings for the
    settings that break silently with several workers."""
    directory = _settings.prometheus_multiproc_dir
    if directory is not None:
        removed = multiprocess.prepare_directory(directory)
        server.log.info("prometheus multiprocess mode in %s (%d stale files removed)", directory, removed)
    elif server.cfg.workers > 1:
        server.log.warning("PROMETHEUS_MULTIPROC_DIR is not set: /metrics shows only the worker that answers")
    if not _settings.secret_key:
        # one key for every worker, created here before the fork (infra.secret_key); several
        # hosts need SECRET_KEY itself (they do not share a data directory)
        shared_secret_key(_settings.data_dir)
        server.log.info("SECRET_KEY is not set: admin sessions are signed with the key in %s (shared by "
                        "this host's workers; set SECRET_KEY when several hosts serve)", key_path(_settings.data_dir))


def post_worker_init(worker):
    """Build this worker's index (and task embeddings) before it accepts requests. A database
    that is down or not migrated yet must not stop the server from booting: the worker then
    starts unready (/readyz says why, with 503) and the next request retries the build."""
    try:
        live = worker.wsgi.extensions["taskfinder"].search.live()
    except Exception:  # logged with its traceback; readiness reports it until it heals
        worker.log.exception("worker %s could not build its search index at start", worker.pid)
        return
    # What the worker holds from here on (modules, the app, the index: ~200,000 objects the
    # cyclic collector tracks) is moved out of the collector's reach, once the start's garbage is
    # collected: a full collection then walks only what requests create, not the whole heap again
    # every few seconds of load (3-5 µs per cached type-ahead answer, issue 43 item 6). Frozen
    # objects are still freed by reference counting, and an index holds no reference cycles (one
    # dropped, or replaced as the live index, leaves nothing for the collector), so the index a
    # later rebuild replaces is freed as before.
    gc.collect()
    gc.freeze()
    worker.log.info("worker %s ready at catalog revision %s", worker.pid, live.revision)


def worker_exit(server, worker):
    """In the worker, as it exits: stop its revision watcher thread cleanly and write the metrics
    it has tallied (infra.metrics.Tally) to the multiprocess files."""
    app = getattr(worker, "wsgi", None)
    services = app.extensions.get("taskfinder") if app is not None else None
    if services is not None:
        services.search.close()
        services.metrics.flush()


def child_exit(server, worker):
    """In the master, when a worker exits: drop its per-worker gauges from /metrics."""
    if _settings.prometheus_multiproc_dir is not None:
        multiprocess.worker_exited(_settings.prometheus_multiproc_dir, worker.pid)

