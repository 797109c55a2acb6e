"""The admin's routes are attached by the app, never by an import (issue 45): admin.routes.install_admin
makes the app's own admin blueprints (admin.blueprint.admin_blueprints) and has each view module
attach its routes (`register(pages, api)`). Importing a view module used to attach its routes
to one module-level blueprint as a side effect, so a module nobody imported served nothing."""
from __future__ import annotations

import ast
from pathlib import Path

from flask import Flask

from admin.blueprint import admin_blueprints
from admin.routes import VIEW_MODULES
from tests.conftest import make_settings

ROOT = Path(__file__).resolve().parents[1]


def admin_endpoints(app: Flask) -> set[str]:
    return {rule.endpoint for rule in app.url_map.iter_rules() if rule.endpoint.startswith("admin.")}


def test_importing_the_view_modules_attaches_no_route():
    """Every view module is imported (VIEW_MODULES): an app given the admin's blueprints without
    their `register` serves only the login page's static files, with it every page."""
    bare, with_views = Flask("bare"), Flask("with_views")
    pages, _ = admin_blueprints()
    bare.register_blueprint(pages)
    assert admin_endpoints(bare) == {"admin.static", "admin.analytics.static", "admin.analytics.overview"}

    pages, api = admin_blueprints()
    for module in VIEW_MODULES:
        module.register(pages, api)
    with_views.register_blueprint(pages)
    assert {"admin.login", "admin.case_preview", "admin.task_publish", "admin.api.case_create",
            "admin.api.task_learned", "admin.completions_page", "admin.start_evaluation"} <= admin_endpoints(with_views)


def test_two_apps_in_one_process_each_serve_the_whole_admin(tmp_path):
    """A blueprint takes no route once an app has registered it: each app gets its own."""
    from app import create_app

    first, second = (create_app(make_settings(tmp_path / name, tmp_path / "cache", EMBEDDINGS_ENABLED="0"))
                     for name in ("first", "second"))
    assert admin_endpoints(first) == admin_endpoints(second)
    assert len(admin_endpoints(first)) > 40
    assert not (first.blueprints["admin"] is second.blueprints["admin"])


def test_no_module_attaches_a_route_to_a_blueprint_it_does_not_define():
    """The rule, read from the source: a route or hook decorator names a blueprint its own module
    defines (admin/analytics/pages.py's, api/'s, widget/'s), never one imported from elsewhere."""
    hooks = {"route", "get", "post", "put", "delete", "patch", "before_request", "after_request", "context_processor"}
    found = []
    packages = [d for d in ROOT.iterdir() if (d / "__init__.py").exists() and d.name not in ("tests", "ops", "migrations")]
    for path in sorted(p for package in packages for p in package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        own = {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)}
        for node in tree.body:
            for decorator in getattr(node, "decorator_list", ()):
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.attr in hooks \
                        and target.value.id not in own:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} @{target.value.id}.{target.attr}")
    assert not found, "routes attached to another module's blueprint when imported:\n" + "\n".join(found)
