"""Offline evaluations of the current catalog, started from the admin page and run in the background.

`EvaluationRuns` keeps one row per run in the database (table evaluation_runs): queued ->
running -> done (with the report) or failed (with the error), the current stage and the share
of the run done. Every serving process reads the same rows, so any worker shows the progress of
a run another worker executes.

`EvaluationJob.start` runs one evaluation in a daemon thread of the serving process: the
deterministic configurations of `evaluation.evaluate` (baselines, ablations, the fitted product;
no LLM) on the database's current tasks and test cases, fitted on a hash split's training part
and measured on its held-out part (catalog.splits.holdout_split, 20 %, seed 42: the CLI's
defaults). One run at a time across every process and host: the run holds the store lease
EVALUATION_LEASE while it runs. A process that dies mid-run leaves its row queued or running;
its heartbeat stops, and the next start marks it failed and takes the lease over.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Callable, Sequence

from sqlalchemy import Engine, select, update
from sqlalchemy.orm import sessionmaker

from catalog.splits import holdout_split
from catalog.store import CatalogStore
from evaluation.configs import resolve
from evaluation.evaluate import EvaluationOptions, Runtime, Split, evaluate
from evaluation.models import EvaluationRun
from evaluation.report import json_safe
from settings import Settings

log = logging.getLogger(__name__)

EVALUATION_LEASE = "evaluation-run"
LEASE_S = 6 * 3600          # the longest a run may hold the lease (a dead holder frees it sooner, see STALL_S)
HEARTBEAT_S = 10            # the running process touches its row this often
STALL_S = 120               # no heartbeat for this long: the process running it is gone
HOLDOUT, SEED = 0.2, 42     # the CLI's defaults (python app.py evaluate)
CONFIGURATIONS = ("deterministic",)
ACTIVE = ("queued", "running")
MAX_ERROR_CHARS = 2000


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def as_utc(moment: datetime | None) -> datetime | None:
    """SQLite hands timezone-aware columns back naive (they were stored in UTC)."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class RunRecord:
    id: int
    created_at: datetime
    started_by: str
    status: str
    progress: float
    stage: str
    report: dict | None
    error: str | None
    started_at: datetime | None
    finished_at: datetime | None
    heartbeat_at: datetime

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    def stalled(self, now: datetime | None = None) -> bool:
        """Queued or running, but the process that owns it has stopped touching it."""
        return self.active and (now or utcnow()) - self.heartbeat_at > timedelta(seconds=STALL_S)

    def status_json(self) -> dict:
        return {"id": self.id, "status": self.status, "progress": self.progress, "stage": self.stage,
                "error": self.error, "started_by": self.started_by, "stalled": self.stalled(),
                "created_at": self.created_at.isoformat(),
                "finished_at": self.finished_at.isoformat() if self.finished_at else None}


def _record(row: EvaluationRun, with_report: bool = True) -> RunRecord:
    return RunRecord(row.id, as_utc(row.created_at), row.started_by, row.status, float(row.progress), row.stage,
                     row.report if with_report else None, row.error, as_utc(row.started_at),
                     as_utc(row.finished_at), as_utc(row.heartbeat_at))


class EvaluationRuns:
    """The evaluation_runs table."""

    def __init__(self, engine: Engine):
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def create(self, started_by: str) -> RunRecord:
        with self._sessions.begin() as session:
            row = EvaluationRun(started_by=started_by[:128], status="queued", progress=0.0, stage="queued",
                                created_at=utcnow(), heartbeat_at=utcnow())
            session.add(row)
            session.flush()
            return _record(row)

    def get(self, run_id: int) -> RunRecord | None:
        with self._sessions() as session:
            row = session.get(EvaluationRun, run_id)
            return _record(row) if row is not None else None

    def recent(self, limit: int = 20) -> list[RunRecord]:
        """The newest runs first, without their reports (the list does not show them)."""
        query = select(EvaluationRun).order_by(EvaluationRun.id.desc()).limit(limit)
        with self._sessions() as session:
            return [_record(row, with_report=False) for row in session.scalars(query)]

    def latest_done(self) -> RunRecord | None:
        query = select(EvaluationRun).where(EvaluationRun.status == "done").order_by(EvaluationRun.id.desc()).limit(1)
        with self._sessions() as session:
            row = session.scalars(query).first()
            return _record(row) if row is not None else None

    def mark_running(self, run_id: int) -> None:
        self._set(run_id, status="running", started_at=utcnow(), stage="starting")

    def report_progress(self, run_id: int, stage: str, fraction: float) -> None:
        self._set(run_id, stage=stage[:200], progress=min(max(float(fraction), 0.0), 1.0))

    def heartbeat(self, run_id: int) -> None:
        self._set(run_id)

    def finish(self, run_id: int, report: dict) -> None:
        self._set(run_id, status="done", report=report, progress=1.0, stage="done", finished_at=utcnow())

    def fail(self, run_id: int, error: str) -> None:
        self._set(run_id, status="failed", error=error[:MAX_ERROR_CHARS], stage="failed", finished_at=utcnow())

    def fail_stalled(self) -> int:
        """Mark every queued or running run whose heartbeat stopped STALL_S ago as failed; the
        number of runs marked (only the caller that marked one may take its lease over)."""
        now = utcnow()
        with self._sessions.begin() as session:
            marked = session.execute(
                update(EvaluationRun)
                .where(EvaluationRun.status.in_(ACTIVE), EvaluationRun.heartbeat_at < now - timedelta(seconds=STALL_S))
                .values(status="failed", stage="failed", finished_at=now,
                        error=f"the process running it stopped (no sign of life for {STALL_S} s)"))
            return marked.rowcount

    def _set(self, run_id: int, **values) -> None:
        with self._sessions.begin() as session:
            session.execute(update(EvaluationRun).where(EvaluationRun.id == run_id)
                            .values(heartbeat_at=utcnow(), **values))


class EvaluationBusy(RuntimeError):
    """Another evaluation is running (in this process or another)."""


def evaluate_catalog(settings: Settings, tasks, cases, embedder, cache,
                     on_progress: Callable[[str, float], None] | None = None, learned=()) -> dict:
    """The offline evaluation of `tasks` and `cases` (module docstring): the report, JSON-safe.
    `learned`: the catalog's exemplars learned from use, blocked pairs already dropped."""
    train, test = holdout_split(cases, HOLDOUT, SEED)
    if not test:
        raise ValueError(f"no held-out test case: {len(cases)} test case(s) leave none in the "
                         f"{HOLDOUT:.0%} held-out split; add test cases first")
    if not [t for t in tasks if t.active]:
        raise ValueError("the catalog has no active task")
    report, _artefacts = evaluate(Runtime(settings, embedder, cache), Split(tasks, train, test, {
        "catalog": "database (admin evaluation page)", "cases": "database",
        "split": f"hash holdout {HOLDOUT} seed {SEED} (catalog.splits.holdout_split)", "holdout": HOLDOUT}),
        resolve(CONFIGURATIONS), EvaluationOptions(seed=SEED, show=False, on_progress=on_progress), learned)
    return json_safe(report)


@dataclass
class EvaluationJob:
    """Starts background evaluations of the catalog in `catalog` (see the module docstring)."""

    runs: EvaluationRuns
    catalog: CatalogStore
    settings: Settings
    embedder: object | None
    cache: object | None
    learned: Callable[[], Sequence] | None = None   # the usable learned exemplars, read when a run starts

    def start(self, started_by: str) -> RunRecord:
        """Queue a run and start its thread; EvaluationBusy while another run holds the lease."""
        if not self._take_lease():
            raise EvaluationBusy("an evaluation is already running; wait for it to finish")
        try:
            run = self.runs.create(started_by)
            threading.Thread(target=self._execute, args=(run.id,), name=f"evaluation-{run.id}", daemon=True).start()
        except Exception:
            self.catalog.release_lease(EVALUATION_LEASE)
            raise
        return run

    def _take_lease(self) -> bool:
        if self.catalog.acquire_lease(EVALUATION_LEASE, LEASE_S):
            return True
        if self.runs.fail_stalled():      # its holder died: this caller marked it, so this caller takes over
            self.catalog.release_lease(EVALUATION_LEASE)
            return self.catalog.acquire_lease(EVALUATION_LEASE, LEASE_S)
        return False

    def _execute(self, run_id: int) -> None:
        """The thread: run, store the report or the error, free the lease. Never raises."""
        finished = threading.Event()
        threading.Thread(target=self._beat, args=(run_id, finished), name=f"evaluation-{run_id}-heartbeat",
                         daemon=True).start()
        try:
            self.runs.mark_running(run_id)
            report = evaluate_catalog(self.settings, self.catalog.tasks(), self.catalog.cases(), self.embedder,
                                      self.cache, lambda stage, fraction: self.runs.report_progress(run_id, stage, fraction),
                                      self.learned() if self.learned is not None else ())
            self.runs.finish(run_id, report)
        except Exception as exc:  # a failed evaluation is reported on the page, never raised into the server
            log.exception("evaluation run %s failed", run_id)
            self._record_failure(run_id, exc)
        finally:
            finished.set()
            self.catalog.release_lease(EVALUATION_LEASE)

    def _record_failure(self, run_id: int, exc: Exception) -> None:
        try:
            self.runs.fail(run_id, f"{type(exc).__name__}: {exc}")
        except Exception:  # the database itself is gone: the heartbeat stops and the run reads as stalled
            log.exception("could not record the failure of evaluation run %s", run_id)

    def _beat(self, run_id: int, finished: threading.Event) -> None:
        while not finished.wait(HEARTBEAT_S):
            try:
                self.runs.heartbeat(run_id)
            except Exception:  # a missed beat only matters if they all fail (then the run is stalled)
                log.warning("evaluation run %s: heartbeat failed", run_id, exc_info=True)
