"""The embeddable search widget and the demo homepage.

    GET /widget.js    the widget: one dependency-free script, no build step (widget/static/widget.js)
    GET /widget.css   its optional stylesheet
    GET /             the demo homepage (DEMO_HOMEPAGE, on by default): a plain page that embeds
                      the widget exactly as a host platform would, searching this app's catalog

A host page embeds it with

    <link rel="stylesheet" href="https://taskfinder.example/widget.css">
    <div id="taskfinder"></div>
    <script src="https://taskfinder.example/widget.js" data-endpoint="https://taskfinder.example/api"
            data-target="#taskfinder" defer></script>

The homepage and the assets carry a Content-Security-Policy: the homepage allows scripts, styles
and requests from this origin only (no inline script or style anywhere), so the widget is shown
to work under `script-src 'self'`.
"""
from __future__ import annotations

from flask import Blueprint, abort, current_app, render_template, send_from_directory

widget_bp = Blueprint("widget", __name__, static_folder="static", static_url_path="/widget-static",
                      template_folder="templates")

# The demo homepage: everything from this origin, nothing inline, never framed.
HOMEPAGE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
                "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
# The assets themselves: a script or stylesheet needs no privileges as a document.
ASSET_CSP = "default-src 'none'; frame-ancestors 'none'"
ASSET_MAX_AGE_S = 300   # short: hosts pick up a new widget within minutes of a deploy


def _asset(filename: str, mimetype: str):
    """A widget asset, loadable by host pages on any origin (Cross-Origin-Resource-Policy), with
    a short cache lifetime and its ETag for cheap revalidation."""
    response = send_from_directory(widget_bp.static_folder, filename, mimetype=mimetype, max_age=ASSET_MAX_AGE_S)
    response.headers["Content-Security-Policy"] = ASSET_CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Cross-Origin-Resource-Policy"] = "cross-origin"
    return response


@widget_bp.get("/widget.js")
def widget_js():
    return _asset("widget.js", "text/javascript")


@widget_bp.get("/widget.css")
def widget_css():
    return _asset("widget.css", "text/css")


@widget_bp.get("/")
def homepage():
    """The demo homepage; a 404 when DEMO_HOMEPAGE is off (a deployment that only serves the API
    and the widget to its host platforms)."""
    if not current_app.config["SETTINGS"].demo_homepage:
        abort(404)
    response = current_app.make_response(render_template("widget/home.html"))
    response.headers["Content-Security-Policy"] = HOMEPAGE_CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Referrer-Policy"] = "same-origin"
    return response
