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

The fixes a run offers, and what each measurably does (`offered_fix`, `measure_fixes`). A miss is
a held-out query: its own case is never learned from, so its fix teaches its words through a
training-side case of the right task (`teaching_case`), or, where the task has none, a new case in
other words. A miss with words that no task text and no training case has (its `held_out_words`)
is offered no fix at all: the only way to teach those words is to copy them from the held-out test
into the catalog, and the next run would then count a query it was shown (issue 44 item 6: the
"ouch report" sentence put "ouch" into a training case and the figure went 0.900 -> 0.925 for
nothing users gain). Each training-side fix is measured in the run itself, the way the next run
will measure it: the same evaluation (the same split, fit and code) of the catalog with that one
case's rationale as the page's link pre-fills it, so the page states the Hit@5 change and the
queries that newly pass or fail, and publishing exactly that change makes the next run measure
exactly that (the case editor's preview cross-validates the whole suite on other folds, another
measure; tests/test_evaluation_page_truth.py).
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Callable, Mapping, Sequence

from sqlalchemy import Engine, select, update
from sqlalchemy.orm import sessionmaker

from catalog.records import CaseRecord, TaskRecord
from catalog.splits import bucket, holdout_split
from catalog.store import CatalogStore
from evaluation.configs import BASELINE, resolve
from evaluation.errors import words_sentence
from evaluation.evaluate import EvaluationOptions, Runtime, Split, evaluate
from evaluation.models import EvaluationRun
from evaluation.report import json_safe
from lexicon.text import terms
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
MAX_MEASURED_FIXES = 10     # the worst misses whose fix a run measures: each is one more evaluation (~15 s on
                            # the demo, the fit's prototypes memoised); the page says the others were not measured
RATIONALE_MAX_CHARS = 5000  # a case's rationale, as the case editor keeps it (admin.editor.case_edit)


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


# -- the fixes a run offers, and their measured effect (module docstring) ------------------------------
def learned_from(query: str) -> bool:
    """Whether a run fits on the case with this query: the training side of the split
    (catalog.splits.holdout_split, HOLDOUT, SEED), decided by the wording alone."""
    return bucket(SEED, query) >= HOLDOUT


def teaching_case(query: str, gold: Sequence[str], cases: Sequence[CaseRecord]) -> CaseRecord | None:
    """The test case to teach a held-out query's words through: a case of one of its right tasks
    that the run learns from, the one sharing the most words with the query (then the first);
    None when every case of those tasks is held out."""
    mine = set(terms(query))
    candidates = [c for c in cases if set(c.gold) & set(gold) and c.query != query and learned_from(c.query)]
    return max(candidates, key=lambda c: len(mine & set(terms(c.query))), default=None)


def taught(rationale: str, sentence: str) -> str:
    """A case's rationale with `sentence` added, exactly as the case editor pre-fills it from the
    evaluation page's link (admin.editor.case_edit: `?rationale=`)."""
    sentence = sentence.strip()[:RATIONALE_MAX_CHARS]
    if not sentence or sentence in rationale:
        return rationale
    return f"{rationale} {sentence}".strip()[:RATIONALE_MAX_CHARS]


@dataclass(frozen=True)
class Fix:
    """What the page offers a miss: `teach` (add `sentence` to the rationale of `case`, a case the
    run learns from), `new_case` (a case in other words with `sentence` as its rationale: every
    case of the right task is held out), or `none` (`held_out_words`: words only the held-out
    test has; teaching them would copy the test into the catalog)."""

    kind: str
    case: CaseRecord | None
    sentence: str
    held_out_words: tuple[str, ...] = ()


def offered_fix(miss: Mapping, tasks: Mapping[str, TaskRecord], cases: Sequence[CaseRecord]) -> Fix:
    """The fix offered for one miss of the report (module docstring). A report from before
    `held_out_words` were recorded falls back on its unknown words (a subset of them)."""
    held = tuple(miss["held_out_words"] if "held_out_words" in miss else (miss.get("unknown_words") or ()))
    if held:
        return Fix("none", None, "", held)
    gold = tuple(miss.get("gold") or ())
    sentence = words_sentence(miss["query"], [tasks[g] for g in gold if g in tasks])
    teacher = teaching_case(miss["query"], gold, cases)
    return Fix("teach" if teacher is not None else "new_case", teacher, sentence)


def _product_misses(report: Mapping) -> list[dict]:
    return ((report.get("error_analysis") or {}).get(BASELINE) or {}).get("misses") or []


def measure_fixes(settings: Settings, tasks, cases: Sequence[CaseRecord], embedder, cache, report: Mapping,
                  learned=(), on_progress: Callable[[float], None] | None = None) -> list[dict]:
    """Each training-side fix the page will offer for `report`'s misses, measured as the next run
    measures it (module docstring): per fix, the miss, the case it edits (id, query, rationale
    before), the sentence, the product's Hit@5 before and after on the same held-out queries,
    and the held-out queries that newly pass and newly fail."""
    tasks_by_id = {t.id: t for t in tasks}
    misses = _product_misses(report)
    before_missed = {m["query"] for m in misses}
    before = report["configs"][BASELINE]
    fixes = [(miss, offered_fix(miss, tasks_by_id, cases)) for miss in misses[:MAX_MEASURED_FIXES]]
    fixes = [(miss, fix) for miss, fix in fixes if fix.kind == "teach"]
    out = []
    for position, (miss, fix) in enumerate(fixes):
        if on_progress is not None:
            on_progress(position / len(fixes))
        changed = [replace(c, rationale=taught(c.rationale, fix.sentence)) if c.id == fix.case.id else c
                   for c in cases]
        after_report = _evaluate(settings, tasks, changed, embedder, cache, None, learned, (BASELINE,))
        after = after_report["configs"][BASELINE]
        after_missed = {m["query"] for m in _product_misses(after_report)}
        out.append({"query": miss["query"], "case_id": fix.case.id, "case_query": fix.case.query,
                    "case_rationale": fix.case.rationale, "rationale": fix.sentence, "n": after["n"],
                    "hit@5": [before["hit@5"], after["hit@5"]],
                    "newly_passing": sorted(before_missed - after_missed),
                    "newly_failing": sorted(after_missed - before_missed)})
    return out


def _evaluate(settings: Settings, tasks, cases, embedder, cache, on_progress, learned, configs) -> dict:
    train, test = holdout_split(cases, HOLDOUT, SEED)
    if not test:
        raise ValueError(f"no held-out test case: {len(cases)} test case(s) leave none in the "
                         f"{HOLDOUT:.0%} held-out split; add test cases first")
    if not [t for t in tasks if t.active]:
        raise ValueError("the catalog has no active task")
    report, _artefacts = evaluate(Runtime(settings, embedder, cache), Split(tasks, train, test, {
        "catalog": "database (admin evaluation page)", "cases": "database",
        "split": f"hash holdout {HOLDOUT} seed {SEED} (catalog.splits.holdout_split)", "holdout": HOLDOUT}),
        configs, EvaluationOptions(seed=SEED, show=False, on_progress=on_progress), learned)
    return report


def evaluate_catalog(settings: Settings, tasks, cases, embedder, cache,
                     on_progress: Callable[[str, float], None] | None = None, learned=(),
                     with_fixes: bool = True) -> dict:
    """The offline evaluation of `tasks` and `cases` (module docstring): the report, JSON-safe,
    with the measured effect of each fix the page offers (`fixes`, unless not `with_fixes`).
    `learned`: the catalog's exemplars learned from use, blocked pairs already dropped."""
    report = _evaluate(settings, tasks, cases, embedder, cache, on_progress, learned, resolve(CONFIGURATIONS))
    if with_fixes:
        # measured at the end of the error analysis stage (its share of the run: 0.99 -> 1)
        report["fixes"] = measure_fixes(
            settings, tasks, cases, embedder, cache, report, learned,
            (lambda done: on_progress("error analysis", round(0.99 + 0.0099 * done, 4))) if on_progress else None)
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
