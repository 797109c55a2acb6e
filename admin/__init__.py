"""The admin lexicon editor (issue 9): accounts, sessions, access policy and read-only pages.

    admin.blueprint  the /admin blueprint, its deny-by-default policy, sessions and CSRF
    admin.views      login, dashboard, tasks and test cases, /admin/api JSON
    admin.evaluation_views  the offline evaluation page (background runs, progress, report, chart)
    admin.accounts   users, roles, argon2 passwords, API tokens
    admin.audit      the audit log helper
    admin.throttle   login throttling
    admin.cli        `python app.py users ...` and `python app.py tokens ...`
"""
from admin import views  # noqa: F401  (registers the routes on admin_bp)
from admin import evaluation_views  # noqa: F401
from admin.blueprint import admin_bp, init_admin

__all__ = ["admin_bp", "init_admin"]
