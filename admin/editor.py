"""The lexicon editor's pages and JSON API: edit test cases and tasks through a preview, publish,
resolve conflicts, browse versions, roll back to one or revert one alone, import and export.

Flow of every page edit: form -> POST .../preview (any signed-in user: viewers may preview) ->
the preview page (before/after computed by admin.preview over the catalog with the change
applied by admin.editing.apply_proposal) -> POST .../publish (editors; hidden fields carry the
proposal and the record version it started from) -> CatalogStore writes the change, its catalog
version and its audit entry in one transaction. A publish based on a stale version gets the
409 conflict page: theirs and yours side by side, and the form again, pre-filled with yours and
based on theirs. The two kinds share that flow's one implementation (`preview_edit`,
`publish_edit`), told what differs by CASE_FORM or TASK_FORM (`EditForm`). Access control is
admin.blueprint.enforce_policy's (login, role, CSRF). `register` attaches the routes
(admin.routes.install_admin); importing this module attaches nothing.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import Callable

from flask import Blueprint, Response, current_app, flash, g, jsonify, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from admin.audit import user_actor
from admin.blueprint import admin_state, refuse
from admin.editing import (CASE, TASK, InvalidProposal, Proposal, active, apply_proposal,
                           case_proposal_from_form, case_proposal_from_json, cases_naming, retired_gold,
                           task_proposal_from_form, task_proposal_from_json)
from admin.searching import ranked_tasks, tasks_by_id
from admin.views import case_json, store, task_json
from catalog.formats import CASE_CATEGORIES, ImportRejected, jsonl_text, load_cases_bytes, load_tasks_bytes
from catalog.records import CaseRecord, TaskRecord
from catalog.store import NotFound, RevertRefused, StaleEdit, StaleRevert, StaleRollback, StoreConflict
from catalog.validation import (MAX_ID, JSONRefused, bounded_id, bounded_int, decode_json, json_problem,
                                task_id_problem, text_problem)
from admin.preview import preview_change
from search.request import ANONYMOUS, EVERY_ROLE, SearchRequest
from serving.service import SearchService

PICKER_RESULTS = 10
MAX_UPLOAD_BYTES = 20 * 1024 * 1024
VERSIONS_PER_PAGE = 50


def register(pages: Blueprint, api: Blueprint) -> None:
    """Attach the editor's routes, and its two checks of every admin request (after the access
    policy, which the blueprint runs first), to the admin's blueprints (admin.routes.install_admin):
    /admin pages on `pages` (endpoints admin.NAME), JSON on `api` (admin.api.NAME)."""
    pages.before_request(refuse_malformed_text)
    pages.before_request(refuse_impossible_task_id)
    pages.add_url_rule("/cases/<int:case_id>", "case_page", case_page, methods=["GET"])
    pages.add_url_rule("/cases/new", "case_new", case_new, methods=["GET"])
    pages.add_url_rule("/cases/<int:case_id>/edit", "case_edit", case_edit, methods=["GET"])
    pages.add_url_rule("/cases/preview", "case_preview", partial(preview_edit, CASE_FORM), methods=["POST"])
    pages.add_url_rule("/cases/publish", "case_publish", partial(publish_edit, CASE_FORM), methods=["POST"])
    pages.add_url_rule("/tasks/new", "task_new", task_new, methods=["GET"])
    pages.add_url_rule("/tasks/<task_id>/edit", "task_edit", task_edit, methods=["GET"])
    pages.add_url_rule("/tasks/preview", "task_preview", partial(preview_edit, TASK_FORM), methods=["POST"])
    pages.add_url_rule("/tasks/publish", "task_publish", partial(publish_edit, TASK_FORM), methods=["POST"])
    pages.add_url_rule("/versions", "versions_page", versions_page, methods=["GET"])
    pages.add_url_rule("/versions/<int:version_id>", "version_page", version_page, methods=["GET"])
    pages.add_url_rule("/versions/<int:version_id>/rollback", "version_rollback", version_rollback,
                       methods=["GET", "POST"])
    pages.add_url_rule("/versions/<int:version_id>/revert", "version_revert", version_revert, methods=["GET", "POST"])
    pages.add_url_rule("/import-export", "import_export_page", import_export_page, methods=["GET"])
    pages.add_url_rule("/import", "import_upload", import_upload, methods=["POST"])
    pages.add_url_rule("/export/<kind>.jsonl", "export_file", export_file, methods=["GET"])
    api.add_url_rule("/task-search", "task_search", task_search, methods=["GET"])
    api.add_url_rule("/cases", "case_create", api_case_create, methods=["POST"])
    api.add_url_rule("/cases/<int:case_id>", "case_update", api_case_update, methods=["PUT"])
    api.add_url_rule("/cases/<int:case_id>", "case_delete", api_case_delete, methods=["DELETE"])
    api.add_url_rule("/tasks", "task_create", api_task_create, methods=["POST"])
    api.add_url_rule("/tasks/<task_id>", "task_update", api_task_update, methods=["PUT"])
    api.add_url_rule("/tasks/<task_id>/retire", "task_retire", api_task_retire, methods=["POST"])
    api.add_url_rule("/versions", "versions", api_versions, methods=["GET"])
    api.add_url_rule("/versions/<int:version_id>", "version", api_version, methods=["GET"])
    api.add_url_rule("/versions/<int:version_id>/rollback", "version_rollback", api_version_rollback,
                     methods=["POST"])


def service() -> SearchService:
    return current_app.extensions["taskfinder"].search


def actor() -> str:
    return user_actor(g.admin_user.name)


def task_search():
    """Search-as-you-type for the gold-task picker: {"tasks": [{id, name, category, roles}]}."""
    found = ranked_tasks(request.args.get("q", ""), PICKER_RESULTS)
    return jsonify({"tasks": [{"id": t.id, "name": t.name, "category": t.category, "roles": list(t.roles)}
                              for t in found]})


# -- every write's text, at the edge -------------------------------------------------------------------
#: Form and JSON fields whose text may span lines (the rest are one line).
MULTILINE_FIELDS = frozenset({"help", "rationale", "message", "aliases"})


def refuse_malformed_text():
    """A write whose form field or JSON body holds a lone surrogate, a control character (NUL:
    PostgreSQL refuses it, SQLite would store it) or nesting deeper than catalog.validation
    allows is a 400 naming the field, on every admin route (runs after the access policy)."""
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return None
    found = None
    if request.is_json:
        found = json_body_problem()
    else:
        for name, value in request.form.items(multi=True):
            problem = text_problem(value, multiline=name in MULTILINE_FIELDS)
            if problem:
                found = (name, problem)
                break
    if found is None:
        return None
    field, problem = found
    message = f"field '{field}': {problem}" if field else f"the body {problem}"
    if request.blueprint == "admin.api":
        return api_error(400, message)
    return refuse(400, message)


def json_body_problem() -> tuple[str, str] | None:
    """(field, problem) of the request's JSON body, or None when it is fine (or empty): decoded
    by catalog.validation's one JSON decoding step (which refuses a lone surrogate anywhere, a
    key included, and names where without echoing it), then checked field by field."""
    data = request.get_data(cache=True)
    if not data:
        return None
    try:
        body = decode_json(data)
    except JSONRefused as exc:
        return exc.field, exc.problem
    except ValueError:
        return "", "is not valid JSON (or is nested too deeply)"
    return json_problem(body, MULTILINE_FIELDS)


def refuse_impossible_task_id():
    """A task id in the address that no task can have (catalog.validation.task_id_problem: NUL,
    which PostgreSQL refuses in a query, a lone surrogate, '.' or '..') is a 404 naming why, on
    every admin route with a <task_id>, before any view queries the store (runs after the access
    policy)."""
    task_id = (request.view_args or {}).get("task_id")
    problem = task_id_problem(task_id) if isinstance(task_id, str) else None
    if problem is None:
        return None
    return refuse(404, f"no such task: a task id {problem}")


# -- one test case -----------------------------------------------------------------------------------
def case_page(case_id: int):
    try:
        case = store().case(case_id)
    except NotFound:
        return refuse(404, "no such test case")
    by_id = tasks_by_id()
    history = store().record_history(CASE, str(case_id))
    return render_template("admin/case.html", case=case, tasks=by_id, retired=retired_gold(case, by_id),
                           history=history, served=served_now(case.query))


def served_now(query: str) -> dict:
    """How the search ranks the test case `query` now, asked as the preview, the fit and the
    evaluation ask a test case (search.request.SearchRequest.of_case: submitted, every role's
    tasks), with which fit, and whether a refit is under way that will replace it: after
    publishing a change the preview said a refit follows; this is where its result shows
    (issue 44 item 4)."""
    service = current_app.extensions["taskfinder"].search
    live = service.live(wait=True)   # the index of what is published now (just after a publish, a rebuild)
    body = service.serve(SearchRequest.of_case(query, k=5)).as_dict()
    return {"results": body["results"], "abstained": bool(body["no_confident_match"]),
            "source": live.params.source, "fit_id": live.params.fit_id,
            "refitting": service.fitting or service.refit_due(live.cases, live.fit_stale)}


def case_new():
    """The form for a new test case; `?query=...&gold=<task id>` (gold repeatable) and
    `&rationale=...` pre-fill it (the analytics pages link here from a query that found nothing;
    the evaluation page's "Add a case in other words", with its suggested rationale)."""
    by_id = tasks_by_id()
    gold = tuple(dict.fromkeys(g for g in request.args.getlist("gold") if g in by_id))[:5]
    draft = CaseRecord(query=request.args.get("query", "")[:500], gold=gold,
                       rationale=request.args.get("rationale", "").strip()[:5000])
    return render_case_form(draft, None)


def case_edit(case_id: int):
    """The edit form; `?rationale=...&message=...` pre-fill the rationale and the change note
    (the evaluation page's "fix its rationale" links here; nothing is saved until published)."""
    try:
        case = store().case(case_id)
    except NotFound:
        return refuse(404, "no such test case")
    suggested = request.args.get("rationale", "").strip()[:5000]
    if suggested and suggested not in case.rationale:
        case = replace(case, rationale=f"{case.rationale} {suggested}".strip()[:5000])
    return render_case_form(case, case.version, message=request.args.get("message", "")[:300])


def render_case_form(case: CaseRecord, base_version: int | None, errors: list[str] = (), status: int = 200,
                     message: str = ""):
    by_id = tasks_by_id()
    return render_template("admin/case_form.html", case=case, base_version=base_version, errors=list(errors),
                           tasks=by_id, retired=retired_gold(case, by_id), categories=CASE_CATEGORIES,
                           message=message), status


def _case_form_retry(errors: list[str], status: int):
    """The form again, with what was sent, after a validation error."""
    form = request.form
    raw_id, raw_base = form.get("case_id", ""), form.get("base_version", "")
    draft = CaseRecord(query=form.get("query", ""), gold=tuple(form.getlist("gold")), rationale=form.get("rationale", ""),
                       category=form.get("category") or None, id=bounded_id(raw_id))
    return render_case_form(draft, bounded_id(raw_base), errors, status,
                            form.get("message", ""))


def _case_proposal() -> Proposal:
    """The case proposal of the posted form."""
    return case_proposal_from_form(request.form, set(tasks_by_id()))


def _case_published(proposal: Proposal, record: CaseRecord):
    if proposal.action == "delete":
        flash(f"Test case deleted: {proposal.record.query}")
        return redirect(url_for("admin.cases_page"))
    flash("Published.")
    return redirect(url_for("admin.case_page", case_id=record.id))


# -- one task ----------------------------------------------------------------------------------------
def task_new():
    return render_task_form(TaskRecord(id="", name=""), None)


def task_edit(task_id: str):
    try:
        task = store().task(task_id)
    except NotFound:
        return refuse(404, "no such task")
    return render_task_form(task, task.version)


def render_task_form(task: TaskRecord, base_version: int | None, errors: list[str] = (), status: int = 200,
                     message: str = ""):
    naming = cases_naming(task.id, store().cases()) if task.id else []
    return render_template("admin/task_form.html", task=task, base_version=base_version, errors=list(errors),
                           naming=naming, message=message), status


def _task_form_retry(errors: list[str], status: int):
    form = request.form
    raw_base = form.get("base_version", "")
    draft = TaskRecord(id=form.get("task_id", ""), name=form.get("name", ""), help=form.get("help", ""),
                       category=form.get("category") or None,
                       aliases=tuple(a.strip() for a in form.get("aliases", "").splitlines() if a.strip()),
                       url=form.get("url") or None,
                       roles=tuple(r.strip() for r in form.get("roles", "").split(",") if r.strip()))
    return render_task_form(draft, bounded_id(raw_base), errors, status,
                            form.get("message", ""))


def _task_proposal() -> Proposal:
    """The task proposal of the posted form; an edit (a base version given) is of the stored task."""
    existing = None
    if request.form.get("base_version", "").strip():
        try:
            existing = store().task(request.form.get("task_id", "").strip())
        except NotFound:
            raise InvalidProposal([f"task {request.form.get('task_id', '')!r} does not exist (any more)"])
    return task_proposal_from_form(request.form, existing)


def _task_published(proposal: Proposal, record: TaskRecord):
    flash({"retire": "Task retired.", "reinstate": "Task reinstated."}.get(proposal.action, "Published."))
    return redirect(url_for("admin.task_page", task_id=record.id))


# -- preview, publish, conflicts ---------------------------------------------------------------------
@dataclass(frozen=True)
class EditForm:
    """What the test case form and the task form do differently in the one flow of a page edit
    (`preview_edit`, `publish_edit`): read the posted proposal (InvalidProposal when the form
    is not one), show the form again with what was sent (errors, HTTP status), and answer a
    publish."""

    proposal: Callable[[], Proposal]
    retry: Callable[[list[str], int], ResponseReturnValue]
    published: Callable[[Proposal, CaseRecord | TaskRecord], ResponseReturnValue]


CASE_FORM = EditForm(_case_proposal, _case_form_retry, _case_published)
TASK_FORM = EditForm(_task_proposal, _task_form_retry, _task_published)


def preview_edit(form: EditForm):
    """The preview page of a posted edit (a case's; a task's, its retirement or reinstatement):
    viewers may preview, it writes nothing. With `edit`, the form again; a stale base version,
    the conflict page."""
    if request.form.get("edit"):
        return form.retry([], 200)
    try:
        proposal = form.proposal()
    except InvalidProposal as exc:
        return form.retry(exc.errors, 422)
    stale = _stale(proposal)
    if stale is not None:
        return stale
    return render_preview(proposal)


def publish_edit(form: EditForm):
    """Publish a posted edit (editors): a stale base version gets the conflict page, any other
    conflict of the store the form again (409)."""
    try:
        proposal = form.proposal()
    except InvalidProposal as exc:
        return form.retry(exc.errors, 422)
    try:
        record = publish(proposal)
    except StaleEdit as exc:
        return render_conflict(proposal, exc.current)
    except StoreConflict as exc:
        return form.retry([str(exc)], 409)
    except NotFound as exc:
        return refuse(404, str(exc))
    return form.published(proposal, record)


def _stale(proposal: Proposal):
    """The conflict page when the proposal's base version is no longer the record's, else None."""
    if proposal.is_new:
        return None
    try:
        current = store().case(int(proposal.key)) if proposal.kind == CASE else store().task(proposal.key)
    except NotFound:
        current = None
    if current is None or current.version != proposal.base_version:
        return render_conflict(proposal, current)
    return None


def preview_queries(proposal: Proposal, before_cases: list[CaseRecord]) -> list[str]:
    """The queries the preview ranks before and after: the edited case's (old and new text), or
    those of the cases naming the edited task."""
    if proposal.kind == CASE:
        old = next((c.query for c in before_cases if c.id == proposal.record.id), None)
        return list(dict.fromkeys(q for q in (proposal.record.query, old) if q))
    return [c.query for c in cases_naming(proposal.record.id, before_cases)]


def view_as_of(form, tasks: list[TaskRecord]) -> str:
    """The preview's viewer from the form's `view_as`: anonymous (the default: what the public
    sees), EVERY_ROLE, or a role some task has; anything else is anonymous."""
    wanted = form.get("view_as", ANONYMOUS)
    known = {r for t in tasks for r in t.roles}
    return wanted if wanted == EVERY_ROLE or wanted in known else ANONYMOUS


def render_preview(proposal: Proposal):
    all_tasks, before_cases = store().tasks(include_inactive=True), store().cases()
    after_tasks, after_cases = apply_proposal(all_tasks, before_cases, proposal)
    # before = what the search indexes now (active tasks, every case); after = the same with the
    # change applied (a pure function of the two), so the preview ranks what publishing would.
    report = preview_change(service(), active(all_tasks), before_cases, active(after_tasks), after_cases,
                            preview_queries(proposal, before_cases),
                            view_as=view_as_of(request.form, [*all_tasks, *after_tasks]),
                            memo=admin_state().previews).as_dict()
    current = None
    if not proposal.is_new:
        current = next((c for c in before_cases if c.id == proposal.record.id), None) if proposal.kind == CASE \
            else next((t for t in all_tasks if t.id == proposal.record.id), None)
    by_id = {t.id: t for t in after_tasks}
    return render_template("admin/preview.html", proposal=proposal, current=current, preview=report,
                           tasks=by_id, retired=retired_gold(proposal.record, by_id) if proposal.kind == CASE else [])


def publish(proposal: Proposal) -> CaseRecord | TaskRecord:
    """Write `proposal` (StaleEdit, StoreConflict or NotFound when it cannot be)."""
    s, who, message, record = store(), actor(), proposal.message, proposal.record
    if proposal.kind == CASE:
        if proposal.action == "delete":
            s.delete_case(record.id, proposal.base_version, who, message)
            return record
        if proposal.is_new:
            return s.add_case(record, who, message)
        return s.update_case(record.id, proposal.base_version, record, who, message)
    if proposal.action in ("retire", "reinstate"):
        return s.set_task_active(record.id, proposal.base_version, proposal.action == "reinstate", who, message)
    if proposal.is_new:
        return s.add_task(record, who, message)
    return s.update_task(record.id, proposal.base_version, record, who, message)


def render_conflict(proposal: Proposal, current: CaseRecord | TaskRecord | None):
    """409: theirs (the record now) beside yours, and the form pre-filled with yours, based on
    theirs, so that publishing it is a deliberate merge."""
    by_id = tasks_by_id()
    mine = proposal.record
    if proposal.kind == CASE:
        form_case = mine if current is not None else CaseRecord(mine.query, mine.gold, mine.rationale, mine.category)
        fields = ("query", "gold", "rationale", "category")
    else:
        form_case = mine
        fields = ("name", "help", "category", "aliases", "url", "roles", "active")
    rows = [(f, getattr(current, f) if current is not None else None, getattr(mine, f)) for f in fields]
    return render_template("admin/conflict.html", proposal=proposal, current=current, rows=rows, draft=form_case,
                           base_version=None if current is None else current.version, tasks=by_id,
                           categories=CASE_CATEGORIES, retired=[]), 409


# -- versions ------------------------------------------------------------------------------------------
def versions_page():
    total = store().version_count()
    pages = max(1, -(-total // VERSIONS_PER_PAGE))
    page = min(max(bounded_int(request.args.get("page", "1")) or 1, 1), pages)
    versions = store().versions(limit=VERSIONS_PER_PAGE, offset=(page - 1) * VERSIONS_PER_PAGE)
    return render_template("admin/versions.html", versions=versions, page=page, pages=pages, total=total)


def version_page(version_id: int):
    """One version: its own changes, and how the catalog now differs from right after it
    (what rolling back to it would undo)."""
    try:
        version = store().version(version_id)
        plan = store().rollback_plan(version_id)
    except NotFound:
        return refuse(404, "no such version")
    return render_template("admin/version.html", version=version, plan=plan,
                           is_latest=plan.latest == version.id, undone=store().versions_after(version_id))


def version_rollback(version_id: int):
    """GET (or a POST without `confirm`): the confirmation page, with what the rollback would
    undo and its ranking preview. POST with `confirm` and `based_on` (the newest version the
    page was computed at) rolls back; a version published in between gets the page again (409)."""
    def rolled_back(new_id: int | None):
        if new_id is None:
            flash(f"The catalog is already as it was at version {version_id}: nothing to roll back.")
            return redirect(url_for("admin.version_page", version_id=version_id))
        flash(f"Rolled back to version {version_id}, published as version {new_id}.")
        return redirect(url_for("admin.version_page", version_id=new_id))

    return confirm_undo(version_id, render_rollback, store().rollback, (StaleRollback,), rolled_back)


def confirm_undo(version_id: int, render: Callable[..., ResponseReturnValue],
                 undo: Callable[[int, str, str, int], int | None], refused: tuple[type[Exception], ...],
                 done: Callable[[int | None], ResponseReturnValue]):
    """The one flow of a rollback and a revert. GET, or a POST without `confirm`: the
    confirmation page, `render(version_id)`. POST with `confirm` and `based_on` (the newest
    version the page was computed at): `undo(version_id, actor, message, based_on)` (the store's
    rollback or revert) publishes the new version and `done(its id)` answers; what `refused`
    names (a version published in between, a record changed since) gets the page again (409)
    with nothing written."""
    if request.method == "GET" or not request.form.get("confirm"):
        return render(version_id)
    based_on = bounded_id(request.form.get("based_on", ""))   # ASCII digits only: int('²') is a ValueError
    if based_on is None:
        return render(version_id, "The confirmation is missing what it was based on: review it again.", 400)
    try:
        new_id = undo(version_id, actor(), request.form.get("message", "").strip()[:300], based_on)
    except NotFound:
        return refuse(404, "no such version")
    except refused as exc:
        return render(version_id, str(exc), 409)
    except StoreConflict as exc:
        return refuse(409, str(exc))
    return done(new_id)


def render_rollback(version_id: int, error: str | None = None, status: int = 200):
    """The confirmation page of a rollback to `version_id`: every record it would change (now
    -> then) and the ranking preview of that change (admin.preview), as for any edit."""
    try:
        version = store().version(version_id)
        plan = store().rollback_plan(version_id)
    except NotFound:
        return refuse(404, "no such version")
    report = undo_preview(plan.changes, plan.tasks, plan.cases)
    return render_template("admin/rollback.html", version=version, plan=plan, preview=report, error=error,
                           undone=store().versions_after(version_id)), status


def undo_preview(changes, tasks, cases) -> dict | None:
    """The ranking preview (admin.preview) of a rollback or a revert: the catalog now against
    `tasks` and `cases`, the catalog once `changes` are published, ranking the queries of every
    case they touch, as the request's "view as" sees it. None when nothing would change."""
    if not changes:
        return None
    all_tasks, now_cases = store().tasks(include_inactive=True), store().cases()
    queries = [side["query"] for c in changes if c.kind == CASE for side in (c.before, c.after) if side]
    return preview_change(service(), active(all_tasks), now_cases, active(list(tasks)), list(cases), queries,
                          view_as=view_as_of(request.values, [*all_tasks, *tasks]), memo=admin_state().previews).as_dict()


def version_revert(version_id: int):
    """Undo version `version_id` alone ("revert this change", like `git revert`). GET (or a POST
    without `confirm`): the confirmation page listing every record it would change and what each
    goes back to, or why it is refused. POST with `confirm` and `based_on` publishes the inverse as
    a new version; a version published in between, or a later change to the same record, gets
    the page again (409) with nothing written."""
    def reverted(new_id: int | None):
        flash(f"Reverted version {version_id} alone, published as version {new_id}.")
        return redirect(url_for("admin.version_page", version_id=new_id))

    return confirm_undo(version_id, render_revert, store().revert, (StaleRevert, RevertRefused), reverted)


def render_revert(version_id: int, error: str | None = None, status: int = 200):
    """The confirmation page of reverting `version_id` alone: each record it would change (now ->
    what it goes back to) with the ranking preview of that change, or the refusal naming the
    record and the later version that touched it."""
    try:
        version = store().version(version_id)
        plan = store().revert_plan(version_id)
    except NotFound:
        return refuse(404, "no such version")
    report = undo_preview(plan.changes, plan.tasks, plan.cases)
    return render_template("admin/revert.html", version=version, plan=plan, preview=report, error=error), status


# -- import and export ---------------------------------------------------------------------------------
IMPORT_KINDS = ("tasks", "cases")


def import_export_page():
    return render_template("admin/import_export.html", kinds=IMPORT_KINDS)


def import_upload():
    """Upload a tasks or cases file: validated like the CLI (catalog.formats), all-or-nothing;
    the line-and-field errors are shown on the page."""
    kind, upload = request.form.get("kind", ""), request.files.get("file")
    replace_all = request.form.get("replace") == "1"
    if kind not in IMPORT_KINDS:
        return _import_page(["choose what the file holds: tasks or test cases"], 400)
    if upload is None or not upload.filename:
        return _import_page(["choose a file to upload"], 400)
    data = upload.read(MAX_UPLOAD_BYTES + 1)
    if len(data) > MAX_UPLOAD_BYTES:
        return _import_page([f"the file is larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MiB"], 413)
    name, message = upload.filename, f"upload of {upload.filename}" + (" (replace)" if replace_all else "")
    try:
        if kind == "tasks":
            report = store().import_tasks(load_tasks_bytes(data, name), replace=replace_all, actor=actor(),
                                          message=message)
        else:
            known = set(tasks_by_id())
            report = store().import_cases(load_cases_bytes(data, name, known), replace=replace_all, actor=actor(),
                                          message=message)
    except ImportRejected as exc:
        return _import_page(exc.errors, 422, source=name)
    except StoreConflict as exc:
        return _import_page([str(exc)], 409, source=name)
    return render_template("admin/import_export.html", kinds=IMPORT_KINDS, report=report, source=name, kind=kind)


def _import_page(errors: list[str], status: int, source: str = ""):
    return render_template("admin/import_export.html", kinds=IMPORT_KINDS, errors=errors, source=source), status


def export_file(kind: str):
    """Every task (retired ones included) or test case, as the export commands write them."""
    if kind == "tasks":
        rows = [t.to_row() for t in store().tasks(include_inactive=True)]
    elif kind == "cases":
        rows = [c.to_row() for c in store().cases()]
    else:
        return refuse(404, "export tasks or cases")
    return Response(jsonl_text(rows), mimetype="application/x-ndjson",
                    headers={"Content-Disposition": f'attachment; filename="taskfinder-{kind}.jsonl"'})


# -- JSON API for automation -----------------------------------------------------------------------------
def api_error(status: int, message: str, **extra):
    return jsonify({"error": message, **extra}), status


def json_body():
    body = request.get_json(silent=True)
    if body is None:
        raise InvalidProposal(["the body must be JSON (Content-Type: application/json)"])
    return body


def api_publish(proposal: Proposal, created: bool = False):
    as_json = case_json if proposal.kind == CASE else task_json
    try:
        record = publish(proposal)
    except StaleEdit as exc:
        return api_error(409, "stale version: somebody else changed this record; merge and send again with "
                              "the current version", theirs=None if exc.current is None else as_json(exc.current),
                         yours={**as_json(proposal.record), "version": proposal.base_version})
    except StoreConflict as exc:
        return api_error(409, str(exc))
    except NotFound as exc:
        return api_error(404, str(exc))
    return jsonify(as_json(record)), 201 if created else 200


def api_case_create():
    try:
        proposal = case_proposal_from_json(json_body(), set(tasks_by_id()), None)
    except InvalidProposal as exc:
        return api_error(400, "invalid test case", errors=exc.errors)
    return api_publish(proposal, created=True)


def api_case_update(case_id: int):
    try:
        proposal = case_proposal_from_json(json_body(), set(tasks_by_id()), case_id)
    except InvalidProposal as exc:
        return api_error(400, "invalid test case", errors=exc.errors)
    return api_publish(proposal)


def api_case_delete(case_id: int):
    version = bounded_id(request.args.get("version", ""))
    if version is None:
        return api_error(400, "query parameter 'version' (the version you are deleting) is required: "
                              f"a whole number from 0 to {MAX_ID}")
    try:
        case = store().case(case_id)
    except NotFound:
        return api_error(404, f"test case {case_id} not found")
    proposal = Proposal(CASE, "delete", case, version, request.args.get("message", "")[:300])
    try:
        publish(proposal)
    except StaleEdit as exc:
        return api_error(409, "stale version: somebody else changed this test case",
                         theirs=None if exc.current is None else case_json(exc.current),
                         yours={**case_json(case), "version": version})
    except NotFound:
        return api_error(404, f"test case {case_id} not found")
    return jsonify({"deleted": case_id})


def api_task_create():
    try:
        proposal = task_proposal_from_json(json_body(), None, None)
    except InvalidProposal as exc:
        return api_error(400, "invalid task", errors=exc.errors)
    return api_publish(proposal, created=True)


def api_task_update(task_id: str):
    try:
        existing = store().task(task_id)
    except NotFound:
        return api_error(404, f"task {task_id} not found")
    try:
        proposal = task_proposal_from_json(json_body(), task_id, existing)
    except InvalidProposal as exc:
        return api_error(400, "invalid task", errors=exc.errors)
    return api_publish(proposal)


def api_task_retire(task_id: str):
    body = request.get_json(silent=True) or {}
    version = body.get("version") if isinstance(body, dict) else None
    if not isinstance(version, int) or bounded_id(version) is None:
        return api_error(400, "field 'version' (the version you are retiring) is required: "
                              f"a whole number from 0 to {MAX_ID}")
    try:
        existing = store().task(task_id)
    except NotFound:
        return api_error(404, f"task {task_id} not found")
    proposal = Proposal(TASK, "retire", replace(existing, active=False), version,
                        str(body.get("message", ""))[:300])
    return api_publish(proposal)


def api_versions():
    limit = bounded_int(request.args.get("limit", "50"), 1, 500)
    offset = bounded_int(request.args.get("offset", "0"))
    if limit is None or offset is None:
        return api_error(400, "limit must be 1-500 and offset a whole number below 2**63")
    versions = store().versions(limit=limit, offset=offset)
    return jsonify({"total": store().version_count(), "versions": [v.as_dict(with_changes=False) for v in versions]})


def api_version(version_id: int):
    try:
        return jsonify(store().version(version_id).as_dict())
    except NotFound:
        return api_error(404, f"version {version_id} not found")


def api_version_rollback(version_id: int):
    """Roll back to `version_id`. `based_on`, required: the newest version the caller reviewed
    (GET /admin/api/versions?limit=1), as the HTML form sends it; a version published since is a
    409 with nothing written (issue 42 item 8: a stray call without it rolled a database back to
    version 1, removing all of its cases)."""
    body = request.get_json(silent=True)
    message = str(body.get("message", ""))[:300] if isinstance(body, dict) else ""
    raw = body.get("based_on") if isinstance(body, dict) else None
    based_on = bounded_id(raw) if isinstance(raw, int) and not isinstance(raw, bool) else None
    try:
        store().version(version_id)
    except NotFound:
        return api_error(404, f"version {version_id} not found")
    if based_on is None:
        return api_error(400, "field 'based_on' is required: the id of the newest version you reviewed "
                              f"(GET /admin/api/versions?limit=1), a whole number from 0 to {MAX_ID}; "
                              "a version published since then is refused (409)")
    try:
        new_id = store().rollback(version_id, actor(), message, based_on)
    except NotFound:
        return api_error(404, f"version {version_id} not found")
    except StoreConflict as exc:
        return api_error(409, str(exc))
    return jsonify({"rolled_back_to": version_id, "version": new_id})
