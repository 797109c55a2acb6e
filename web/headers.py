"""Security headers on the JSON API's responses.

The API answers JSON (and /metrics text), never a page, so a browser must never sniff it into
HTML or script, render it in a frame, or load anything on its behalf: `default-src 'none';
frame-ancestors 'none'` is the whole CSP. They are set by path (API_PATHS), on success and error
responses alike (a 404 or 429 JSON too), and only where nothing else set them: the admin sets
its own CSP for its pages, and the routes that serve HTML or script for embedding (the widget:
`/`, `/widget.js`, `/widget.css`) are outside these paths and get none of this.
"""
from __future__ import annotations

import re

from flask import Flask

API_PATHS = ("/api", "/healthz", "/readyz", "/metrics", "/openapi.json")   # each and everything below it
API_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
_API_PATH = re.compile("(?:" + "|".join(re.escape(p) for p in API_PATHS) + ")(?:/|$)")
_LOWER_API_HEADERS = tuple((name.lower(), name, value) for name, value in API_HEADERS.items())


def is_api_path(path: str) -> bool:
    return _API_PATH.match(path) is not None


def with_api_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """`headers` (a WSGI header list) plus each API header it does not have yet."""
    present = {name.lower() for name, _value in headers}
    headers.extend((name, value) for lower, name, value in _LOWER_API_HEADERS if lower not in present)
    return headers


class ApiHeaders:
    """WSGI middleware adding API_HEADERS to the responses of API_PATHS (set at start_response,
    so error responses and 429s get them too, with no Flask hook on the request path)."""

    def __init__(self, wsgi_app):
        self.wsgi_app = wsgi_app

    def __call__(self, environ, start_response):
        if not is_api_path(environ.get("PATH_INFO", "")):
            return self.wsgi_app(environ, start_response)

        def api_start_response(status, headers, exc_info=None):
            return start_response(status, with_api_headers(headers), exc_info)

        return self.wsgi_app(environ, api_start_response)


def install_api_headers(app: Flask) -> None:
    app.wsgi_app = ApiHeaders(app.wsgi_app)
