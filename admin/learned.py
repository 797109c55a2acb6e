"""What each task learned from use, in the editor, and the admin's two answers to it.

A task's page lists its learned evidence (analytics.learning: one aggregate per normalised query
and task, from position-bias-corrected clicks): the query, how many distinct sessions, networks
and verified people clicked it, the counted clicks (and how many of them came after the person
rephrased the query: analytics.learning.chain_votes), the estimated relevance, and whether it
counts at the next fit or what it lacks (search.learned.shortfall, the fit's own rule under this
server's settings). For each row the admin can

* **make it a test case**: the case form, pre-filled with the query and this task as gold (or
  the stored case of that query, to add this task to its gold); it then goes through the
  normal preview and publish, a versioned edit like any other;
* **block** it: the pair stops counting (the fit's I/O edge reads the blocks and drops them,
  catalog.store.learned_blocks). A block is published as a catalog version with its audit
  entry, listed on the versions page and undone by a rollback or by "unblock".

The dashboard lists the learned pairs that count at the next fit, those the serving fit does not
hold yet first (`counting_rows`: the fit's own rule, the networks' share and cap included), and
the queries people were shown results for and nearly never clicked
(search.learned.unclicked_queries under this server's settings): the next fit weighs them as
negatives of the "no confident match" model. Each links to the case form pre-filled with the
query: a test case with that query (in scope with its gold, or out of scope) decides instead.

Access control is admin.blueprint.enforce_policy's: anyone signed in sees the panel; blocking
and unblocking are writes (the editor role and the CSRF token).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from flask import Blueprint, current_app, flash, g, jsonify, redirect, request, url_for
from sqlalchemy.orm import Session

from admin.audit import user_actor
from admin.blueprint import refuse
from analytics.learning import (LearnedPair, counting_rule, describe_waiting, learned_and_unclicked, load_learned,
                                waiting_clicks)
from catalog.records import CaseRecord
from catalog.store import CatalogStore, NotFound
from search.learned import CountingRule, eligible, heavy_under, shortfall

MAX_REASON = 300


def register(pages: Blueprint, api: Blueprint) -> None:
    """Attach this module's routes, and the task page's `learned_waiting` template global, to the
    admin's blueprints (admin.routes.install_admin): /admin pages on `pages` (endpoints
    admin.NAME), JSON on `api` (admin.api.NAME)."""
    pages.add_app_template_global(learned_waiting, "learned_waiting")
    pages.add_url_rule("/tasks/<task_id>/learned/block", "learned_block", learned_block, methods=["POST"])
    pages.add_url_rule("/tasks/<task_id>/learned/unblock", "learned_unblock", learned_unblock, methods=["POST"])
    api.add_url_rule("/tasks/<task_id>/learned", "task_learned", api_task_learned, methods=["GET"])
    api.add_url_rule("/tasks/<task_id>/learned/block", "task_learned_block", api_learned_block, methods=["POST"])


@dataclass(frozen=True)
class LearnedRow:
    """One row of a task's learned-evidence panel."""

    query: str
    task_id: str
    sessions: int             # distinct sessions that clicked
    clicks: int
    relevance: float          # estimated P(relevant), [0, 1]
    blocked: bool
    case: CaseRecord | None   # the stored test case with exactly this query, if any
    networks: int = 0         # distinct client networks that clicked
    people: int = 0           # distinct verified people that clicked
    lacks: str | None = None  # why it does not count at the next fit (search.learned.shortfall); None: it counts
    rephrased: int = 0        # of `clicks`, those made after rephrasing the query (analytics.learning.chain_votes)

    @property
    def case_names_task(self) -> bool:
        return self.case is not None and self.task_id in self.case.gold


def learned_rows(pairs: Iterable[LearnedPair], task_id: str, blocked: frozenset[tuple[str, str]],
                 cases: Sequence[CaseRecord], lacks: Callable[[LearnedPair], str | None] = lambda pair: None,
                 ) -> list[LearnedRow]:
    """The panel of `task_id`: its learned pairs, most relevant first (then most sessions), each
    marked blocked or not and with what it `lacks` to count, then the blocks of this task whose
    evidence has gone (so that they can still be lifted). A pair no session clicked (the task
    was only shown for the query) taught nothing about this task and is left out unless it is
    blocked (issue 32 item 3: rows with 0 sessions were listed as "learned")."""
    by_query = {c.query: c for c in cases}
    rows = [LearnedRow(p.query, task_id, p.sessions, p.clicks, p.relevance, (p.query, task_id) in blocked,
                       by_query.get(p.query), p.networks, p.people, lacks(p), p.rephrased_clicks)
            for p in pairs if p.task_id == task_id and (p.clicks > 0 or p.sessions > 0 or (p.query, task_id) in blocked)]
    rows.sort(key=lambda r: (-r.relevance, -r.sessions, r.query))
    listed = {r.query for r in rows}
    rows += [LearnedRow(query, task_id, 0, 0, 0.0, True, by_query.get(query), lacks="blocked")
             for query, blocked_task in sorted(blocked) if blocked_task == task_id and query not in listed]
    return rows


# -- I/O ---------------------------------------------------------------------------------------
def _store() -> CatalogStore:
    return current_app.extensions["taskfinder"].store


def task_learned_rows(task_id: str, cases: Sequence[CaseRecord]) -> list[LearnedRow]:
    """The panel of one task, read from the database (learned_evidence and learned_blocks)."""
    store = _store()
    with Session(store.engine) as session:
        pairs = load_learned(session)   # every task's: the networks' share and cap are over all of them
    blocked = store.blocked_pairs()
    known = frozenset(t.id for t in store.tasks())   # the active ones, as the fit sees them
    rule = CountingRule(**counting_rule(current_app.extensions["taskfinder"].settings))
    heavy = heavy_under(rule, [p for p in pairs if shortfall(p, rule, blocked, known) is None])
    return learned_rows(pairs, task_id, blocked, cases, lambda pair: shortfall(pair, rule, blocked, known, heavy))


def learned_waiting(task_id: str) -> str | None:
    """The task page's line on this task's clicks that no fit has folded in yet, and when they
    will count (analytics.learning.waiting_clicks: LEARNING_SETTLE_S after each was received);
    None when none waits. A template global, so the page says it without a change to its view."""
    services = current_app.extensions["taskfinder"]
    waiting = waiting_clicks(services.store.engine, services.settings, task_id=task_id)
    if not waiting.clicks:
        return None
    return describe_waiting(waiting, services.settings, what="clicks on this task")


@dataclass(frozen=True)
class UnclickedRow:
    """A query nobody clicks, on the dashboard."""

    query: str
    viewers: int       # distinct sessions shown its results
    networks: int      # their distinct networks
    clickers: int      # distinct sessions that clicked any of them
    people: int = 0    # distinct verified people shown its results


def unclicked_rows(pairs: Sequence[LearnedPair], cases: Sequence[CaseRecord], settings) -> list[UnclickedRow]:
    """The queries the next fit weighs as abstention negatives (the fit's own rule, under
    `settings`; a query with a test case is left to the case), most viewed first."""
    queries = set(learned_and_unclicked(pairs, settings)[1]) - {c.query for c in cases}
    first = {}
    for pair in pairs:
        if pair.query in queries and pair.query not in first:
            first[pair.query] = UnclickedRow(pair.query, int(pair.query_viewers or 0),
                                             int(pair.query_viewer_networks or 0), int(pair.query_sessions or 0),
                                             int(pair.query_viewer_people or 0))
    return sorted(first.values(), key=lambda r: (-r.viewers, r.query))


def dashboard_unclicked(cases: Sequence[CaseRecord]) -> list[UnclickedRow]:
    """unclicked_rows from the database, under this server's settings."""
    with Session(_store().engine) as session:
        pairs = load_learned(session)
    return unclicked_rows(pairs, cases, current_app.extensions["taskfinder"].settings)


@dataclass(frozen=True)
class CountingRow:
    """A learned pair that counts, on the dashboard."""

    query: str
    task_id: str
    task_name: str
    sessions: int
    networks: int
    people: int
    updated_at: object        # its latest evidence (datetime)
    serving: bool             # the serving fit holds it; False: it joins at the next fit


def counting_rows(pairs: Sequence[LearnedPair], rule: CountingRule, blocked: frozenset[tuple[str, str]],
                  tasks: Sequence, serving: frozenset[tuple[str, str]]) -> list[CountingRow]:
    """The learned pairs that count at the next fit, by the fit's own rule (search.learned.eligible:
    blocks, active tasks, sessions, networks or people, relevance, and the networks' share and
    cap over all the pairs), newest first: those the serving fit does not hold yet (`serving`:
    its (query, task) pairs) before those it does, each group by latest evidence. Why (issue 33
    item 1): a pair an attacker made count showed only on its task's page; here every pair that
    will move a ranking at the next fit is listed before it does, where the admin can block it."""
    names = {t.id: t.name for t in tasks}
    counted = {(e.query, e.task_id) for e in eligible(pairs, rule, blocked, names.keys())}
    rows = [CountingRow(p.query, p.task_id, names[p.task_id], p.sessions, p.networks, p.people, p.updated_at,
                        (p.query, p.task_id) in serving)
            for p in pairs if (p.query, p.task_id) in counted]
    rows.sort(key=lambda r: (r.serving, -r.updated_at.timestamp(), r.query, r.task_id))
    return rows


def dashboard_counting() -> list[CountingRow]:
    """counting_rows from the database, under this server's settings and its serving fit."""
    services = current_app.extensions["taskfinder"]
    with Session(_store().engine) as session:
        pairs = load_learned(session)
    live = services.search.live()
    serving = frozenset((e.query, e.task_id) for e in live.params.learned)
    return counting_rows(pairs, CountingRule(**counting_rule(services.settings)), _store().blocked_pairs(),
                         _store().tasks(), serving)


def _block_form() -> tuple[str, str, str]:
    form = request.form
    return form.get("query", ""), form.get("message", "").strip()[:MAX_REASON], form.get("reason", "")[:MAX_REASON]


def learned_block(task_id: str):
    query, message, reason = _block_form()
    try:
        version = _store().block_learned(query, task_id, user_actor(g.admin_user.name), message, reason)
    except NotFound:
        return refuse(404, "no such task")
    except ValueError as exc:
        return refuse(400, f"cannot block: {exc}")
    flash(f"Blocked: {query!r} no longer counts for this task (version {version})." if version
          else f"{query!r} was blocked already.")
    return redirect(url_for("admin.task_page", task_id=task_id) + "#learned")


def learned_unblock(task_id: str):
    query, message, _ = _block_form()
    try:
        version = _store().unblock_learned(query, task_id, user_actor(g.admin_user.name), message)
    except NotFound:
        return refuse(404, f"{query!r} is not blocked for this task")
    flash(f"Unblocked: {query!r} counts again for this task (version {version}).")
    return redirect(url_for("admin.task_page", task_id=task_id) + "#learned")


# -- JSON for automation -----------------------------------------------------------------------
def _row_json(row: LearnedRow) -> dict:
    return {"query": row.query, "sessions": row.sessions, "networks": row.networks, "people": row.people,
            "clicks": row.clicks, "rephrased_clicks": row.rephrased, "relevance": row.relevance, "blocked": row.blocked,
            "counts": row.lacks is None, "lacks": row.lacks, "case_id": None if row.case is None else row.case.id}


def api_task_learned(task_id: str):
    try:
        _store().task(task_id)
    except NotFound:
        return jsonify({"error": f"task {task_id} not found"}), 404
    return jsonify({"task_id": task_id, "learned": [_row_json(r) for r in task_learned_rows(task_id, _store().cases())]})


def api_learned_block(task_id: str):
    body = request.get_json(silent=True)
    if not isinstance(body, dict) or not isinstance(body.get("query"), str):
        return jsonify({"error": "the body must be a JSON object with a string 'query'"}), 400
    unblock = request.args.get("unblock") == "1"
    message = str(body.get("message", ""))[:MAX_REASON]
    try:
        if unblock:
            version = _store().unblock_learned(body["query"], task_id, user_actor(g.admin_user.name), message)
        else:
            version = _store().block_learned(body["query"], task_id, user_actor(g.admin_user.name), message,
                                             str(body.get("reason", ""))[:MAX_REASON])
    except NotFound as exc:
        return jsonify({"error": str(exc)}), 404
    except ValueError as exc:
        return jsonify({"error": str(exc)}), 400
    return jsonify({"query": body["query"], "task_id": task_id, "blocked": not unblock, "version": version})
