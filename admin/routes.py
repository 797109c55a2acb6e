"""The admin's pages and JSON API, installed on an app: `install_admin` is the one place that
brings the admin's view modules in, has each attach its routes to the app's new admin
blueprints (`register(pages, api)`: importing a view module attaches nothing) and registers them.
`create_app` calls it only when the app serves HTTP, so the command line (`app.py search`,
`users create`, `evaluate`) never imports the pages, the preview and the evaluation views (about
0.35 s of imports on our AMD machine; issue 44 item 9)."""
from __future__ import annotations

from flask import Flask

from admin import completions, editor, evaluation_views, learned, views
from admin.accounts import AccountStore
from admin.blueprint import admin_blueprints, init_admin
from admin.throttle import LoginThrottle
from settings import Settings

#: The modules whose routes the admin serves, in the order they attach them.
VIEW_MODULES = (views, editor, learned, evaluation_views, completions)


def install_admin(app: Flask, settings: Settings, accounts: AccountStore, throttle: LoginThrottle) -> None:
    """Configure the admin (sessions, CSRF, policy) and register its blueprint, with the nested
    /admin/api and /admin/analytics, once every view module has attached its routes to it."""
    init_admin(app, settings, accounts, throttle)
    pages, api = admin_blueprints()
    for module in VIEW_MODULES:
        module.register(pages, api)
    app.register_blueprint(pages)
