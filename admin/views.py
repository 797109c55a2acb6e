"""Admin pages (login, dashboard, read-only tasks and test cases) and the /admin/api JSON routes.

Access control is not here: admin.blueprint.enforce_policy has already refused whoever may not
see a view by the time it runs. Views only read the catalog through CatalogStore.
"""
from __future__ import annotations

import logging

from flask import Blueprint, current_app, g, jsonify, redirect, render_template, request, session, url_for
from flask_login import login_user, logout_user

from admin.audit import user_actor
from admin.blueprint import accounts, admin_state, refuse, safe_next
from admin.filters import STATUSES, cases_for_ranking, filter_cases, filter_tasks, page_of
from admin.learned import dashboard_counting, dashboard_unclicked, task_learned_rows
from admin.searching import ranked_tasks
from admin.throttle import DEVICE_COOKIE, DEVICE_COOKIE_PATH, DeviceCookies, Lockout
from infra.words import counted
from catalog.records import CaseRecord, TaskRecord
from catalog.store import CatalogStore, NotFound
from catalog.versions import TASK
from web.limits import request_client
from catalog.validation import bounded_int
from search.learned import ANONYMOUS_WINDOW

log = logging.getLogger(__name__)

LOGIN_FAILED = "Unknown user name or wrong password."


def register(pages: Blueprint, api: Blueprint) -> None:
    """Attach this module's routes to the admin's blueprints (admin.routes.install_admin):
    /admin pages on `pages` (endpoints admin.NAME), JSON on `api` (admin.api.NAME)."""
    pages.add_url_rule("/login", "login", login, methods=["GET", "POST"])
    pages.add_url_rule("/logout", "logout", logout, methods=["POST"])
    pages.add_url_rule("/", "dashboard", dashboard, methods=["GET"])
    pages.add_url_rule("/tasks", "tasks_page", tasks_page, methods=["GET"])
    pages.add_url_rule("/tasks/<task_id>", "task_page", task_page, methods=["GET"])
    pages.add_url_rule("/cases", "cases_page", cases_page, methods=["GET"])
    api.add_url_rule("/whoami", "whoami", whoami, methods=["GET"])
    api.add_url_rule("/tasks", "tasks", api_tasks, methods=["GET"])
    api.add_url_rule("/cases", "cases", api_cases, methods=["GET"])


def store() -> CatalogStore:
    return current_app.extensions["taskfinder"].store


def _page_number() -> int:
    raw = request.args.get("page", "1")
    return bounded_int(raw) or 1


# -- sign in and out -----------------------------------------------------------------------
def login():
    if request.method == "GET":
        if g.admin_user is not None:
            return redirect(safe_next(request.args.get("next")))
        return render_template("admin/login.html", next=request.args.get("next", ""))
    name, password = request.form.get("username", ""), request.form.get("password", "")
    address, throttle = request_client(current_app.config["SETTINGS"]), admin_state().throttle
    device = _device_cookies().device_for(request.cookies.get(DEVICE_COOKIE), name)
    lockout = throttle.locked_for(name, address, device)
    if lockout.seconds:
        current_app.extensions["taskfinder"].metrics.ratelimited.labels(lockout.window).inc()
        return _throttled(lockout)
    user = accounts().authenticate(name, password)
    if user is None:
        throttle.failed(name, address, device)
        log.info("admin login failed for %r from %s%s", name[:64], request.remote_addr,
                 " (known device)" if device else "")
        return _login_form(LOGIN_FAILED, 401)
    throttle.succeeded(name, address, device)
    session.clear()  # nothing from before sign-in survives it (a new CSRF token, no fixation)
    login_user(user)
    session.permanent = True  # expires after SESSION_LIFETIME_S
    log.info("admin login: %s (%s) from %s", user.name, user.role, request.remote_addr)
    response = redirect(safe_next(request.form.get("next")))
    _remember_device(response, user.name)
    return response


def _device_cookies() -> DeviceCookies:
    """Device cookies signed with the key that signs sessions (admin.blueprint.init_admin)."""
    return DeviceCookies(current_app.secret_key)


def _remember_device(response, name: str) -> None:
    """Mark this browser as one `name` signed in from (admin.throttle: exempt from the account
    window a botnet can fill). Sent only to the login form; unreadable to scripts; never sent
    by a cross-site request (Strict: the form is posted from this site); Secure like the session."""
    cookies = _device_cookies()
    response.set_cookie(DEVICE_COOKIE, cookies.issue(name), max_age=cookies.max_age_s, path=DEVICE_COOKIE_PATH,
                        secure=current_app.config["SESSION_COOKIE_SECURE"],
                        httponly=True, samesite="Strict")


def _throttled(lockout: Lockout):
    """429 with Retry-After (whole seconds): the client is told when to come back rather than
    held in a sleeping request thread."""
    minutes = max(1, round(lockout.seconds / 60))
    response, status = _login_form(f"Too many failed sign-ins. Try again in about {counted(minutes, 'minute')}.", 429)
    return response, status, {"Retry-After": str(int(lockout.seconds))}


def _login_form(error: str, status: int):
    return render_template("admin/login.html", error=error, next=request.form.get("next", ""),
                           username=request.form.get("username", "")), status


def logout():
    """End the session server-side, not only in this browser: a copy of the cookie taken before
    stops working too (admin.accounts.AccountStore.end_sessions)."""
    user = g.get("admin_user")
    if user is not None and g.get("admin_auth") == "session":
        accounts().end_sessions(user.name, actor=user_actor(user.name))
    logout_user()
    session.clear()
    return redirect(url_for("admin.login"))


# -- pages ---------------------------------------------------------------------------------
def dashboard():
    tasks, cases = store().tasks(include_inactive=True), store().cases()
    summary = {
        "tasks": len(tasks),
        "active_tasks": sum(t.active for t in tasks),
        "restricted_tasks": sum(bool(t.roles) for t in tasks),
        "test_cases": len(cases),
        "out_of_scope_cases": sum(not c.gold for c in cases),
        "revision": store().revision(),
    }
    return render_template("admin/dashboard.html", summary=summary,
                           roles=sorted({r for t in tasks for r in t.roles}), unclicked=dashboard_unclicked(cases),
                           counting=dashboard_counting(), anonymous_window=ANONYMOUS_WINDOW,
                           min_people=current_app.extensions["taskfinder"].settings.learning_min_people)


BROWSE_RESULTS = 50  # tasks the browse pages' search box ranks


def _search_text() -> str:
    return request.args.get("search", "")[:256].strip()


def tasks_page():
    """Tasks, filtered; with `search`, in the product's ranking of that query (then filtered)."""
    all_tasks = store().tasks(include_inactive=True)
    filters, search = _task_filters(), _search_text()
    listed = ranked_tasks(search, BROWSE_RESULTS) if search else all_tasks
    matching = filter_tasks(listed, **filters)
    shown, page, pages = page_of(matching, _page_number())
    return render_template("admin/tasks.html", tasks=shown, filters={**filters, "search": search}, page=page,
                           pages=pages, total=len(matching), statuses=STATUSES,
                           categories=sorted({t.category for t in all_tasks if t.category}),
                           roles=sorted({r for t in all_tasks for r in t.roles}),
                           retired_cases=_retired_case_counts(all_tasks))


def task_page(task_id: str):
    try:
        task = store().task(task_id)
    except NotFound:
        return refuse(404, "no such task")
    all_cases = store().cases()
    return render_template("admin/task.html", task=task, cases=filter_cases(all_cases, task=task.id),
                           learned=task_learned_rows(task.id, all_cases), history=store().record_history(TASK, task.id))


def cases_page():
    """Test cases, filtered; with `search`, those naming the tasks the product ranks for that
    query, best-ranked first. Cases naming a retired task are flagged."""
    all_cases = store().cases()
    filters, search = _case_filters(), _search_text()
    listed = cases_for_ranking(all_cases, [t.id for t in ranked_tasks(search, BROWSE_RESULTS)]) if search \
        else all_cases
    matching = filter_cases(listed, **filters)
    shown, page, pages = page_of(matching, _page_number())
    tasks = {t.id: t for t in store().tasks(include_inactive=True)}
    return render_template("admin/cases.html", cases=shown, filters={**filters, "search": search}, page=page,
                           pages=pages, total=len(matching), tasks=tasks,
                           categories=sorted({c.category for c in all_cases if c.category}))


def _retired_case_counts(tasks) -> dict[str, int]:
    """{retired task id: how many test cases still name it}."""
    retired = {t.id for t in tasks if not t.active}
    counts: dict[str, int] = {}
    for case in store().cases():
        for task_id in set(case.gold) & retired:
            counts[task_id] = counts.get(task_id, 0) + 1
    return counts


def _task_filters() -> dict:
    status = request.args.get("status", "active")
    return {"q": request.args.get("q", "")[:200], "category": request.args.get("category", ""),
            "role": request.args.get("role", ""), "status": status if status in STATUSES else "active"}


def _case_filters() -> dict:
    return {"q": request.args.get("q", "")[:200], "category": request.args.get("category", ""),
            "task": request.args.get("task", "")}


# -- JSON for automation (bearer token or session) -------------------------------------------
def task_json(task: TaskRecord) -> dict:
    return {**task.to_row(), "roles": list(task.roles), "active": task.active, "version": task.version}


def case_json(case: CaseRecord) -> dict:
    return {"id": case.id, "query": case.query, "gold": list(case.gold), "rationale": case.rationale,
            "category": case.category, "version": case.version}


def whoami():
    user = g.admin_user
    return jsonify({"name": user.name, "role": user.role, "auth": g.admin_auth})


def api_tasks():
    found = filter_tasks(store().tasks(include_inactive=True), **_task_filters())
    return jsonify({"count": len(found), "tasks": [task_json(t) for t in found]})


def api_cases():
    found = filter_cases(store().cases(), **_case_filters())
    return jsonify({"count": len(found), "cases": [case_json(c) for c in found]})
