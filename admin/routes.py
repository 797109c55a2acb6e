"""The admin's pages and JSON API, installed on an app: `install_admin` is the one place that
brings the admin's view modules in (each attaches its routes to `admin_bp` when imported) and
registers the blueprint. `create_app` calls it only when the app serves HTTP, so the command line
(`app.py search`, `users create`, `evaluate`) never imports the pages, the preview and the
evaluation views (about 0.35 s of imports on our AMD machine; issue 44 item 9)."""
from __future__ import annotations

from flask import Flask

from admin.accounts import AccountStore
from admin.blueprint import admin_bp, init_admin
from admin.throttle import LoginThrottle
from settings import Settings


def install_admin(app: Flask, settings: Settings, accounts: AccountStore, throttle: LoginThrottle) -> None:
    """Configure the admin (sessions, CSRF, policy) and register `admin_bp`, with its nested
    /admin/api and /admin/analytics blueprints, once every view module has attached its routes."""
    from admin import completions, editor, evaluation_views, learned, views  # noqa: F401  (their routes)
    init_admin(app, settings, accounts, throttle)
    app.register_blueprint(admin_bp)
