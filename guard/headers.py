"""Security headers on the JSON API's responses.

The API answers JSON (and /metrics text), never a page, so a browser must never sniff it into
HTML or script, render it in a frame, or load anything on its behalf: `default-src 'none';
frame-ancestors 'none'` is the whole CSP. They are set by path (API_PATHS), on success and error
responses alike (a 404 or 429 JSON too), and only where nothing else set them: the admin sets
its own CSP for its pages, and the routes that serve HTML or script for embedding (the widget:
`/`, `/widget.js`, `/widget.css`) are outside these paths and get none of this.
"""
from __future__ import annotations

from flask import Flask, Response, request

API_PATHS = ("/api", "/healthz", "/readyz", "/metrics", "/openapi.json")   # each and everything below it
API_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


def is_api_path(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in API_PATHS)


def install_api_headers(app: Flask) -> None:
    @app.after_request
    def api_security_headers(response: Response) -> Response:
        if is_api_path(request.path):
            for name, value in API_HEADERS.items():
                response.headers.setdefault(name, value)
        return response
