"""The server console carries no library debug chatter (issue 44 item 10): waitress's `serve`
calls `logging.basicConfig()`, and bm25s sets its own logger to DEBUG on import, so an evaluation
run from the admin (its plain BM25 baseline) printed `DEBUG:bm25s:Building index from tokens`."""
from __future__ import annotations

import io
import logging

from catalog.records import CaseRecord, TaskRecord
from evaluation.configs import ConfigSpec
from evaluation.replay import run_bm25


def test_the_bm25_baseline_prints_no_debug_lines_on_a_configured_console():
    console = io.StringIO()
    handler = logging.StreamHandler(console)   # what logging.basicConfig() puts on the root logger
    handler.setFormatter(logging.Formatter(logging.BASIC_FORMAT))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        tasks = [TaskRecord(id="a.one", name="Attendance report", help="daily attendance"),
                 TaskRecord(id="b.two", name="Medical exam", help="health records")]
        train = [CaseRecord("who came today", ("a.one",), "", None)]
        test = [CaseRecord("medical exam due", ("b.two",), "", None)]
        run = run_bm25(ConfigSpec("bm25", "bm25", "plain BM25"), tasks, train, test, depth=5)
    finally:
        root.removeHandler(handler)
    assert run.rows[0].ranking[0] == "b.two"
    assert "DEBUG" not in console.getvalue(), console.getvalue()
    assert not logging.getLogger("bm25s").isEnabledFor(logging.INFO)
