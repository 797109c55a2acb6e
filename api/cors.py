"""CORS for the public API, so that a widget on another site (the host platform's homepage) can
call /api/search, /api/events and /api/kb/search from the browser.

Policy (CORS_ORIGINS, settings.cors_origins):

* empty (the default): same-origin only; no CORS header is ever sent, and a preflight is refused;
* a list of origins (`https://www.example.org`): a request whose Origin is in the list gets
  `Access-Control-Allow-Origin: <that origin>`; every response of these paths carries
  `Vary: Origin`, so a shared cache never hands one origin's answer to another;
* `*`: any origin, answered `Access-Control-Allow-Origin: *`.

Credentials (cookies) are never allowed: `Access-Control-Allow-Credentials` is never sent, so a
wildcard can never be combined with them. The public API has no cookies anyway; a role token
travels in the Authorization header, which the caller sets itself.

Preflight (OPTIONS with Access-Control-Request-Method) on these paths: 204 with the allowed
method of that path, the allowed request headers (Authorization, Content-Type) and
Access-Control-Max-Age; 403 with a JSON message naming what is not allowed (origin, method or
header). Other paths are not touched.
"""
from __future__ import annotations

from dataclasses import dataclass

from flask import Flask, Response, jsonify, request

#: The public API: path -> the one method a browser may call it with.
PUBLIC_API = {"/api/search": "GET", "/api/kb/search": "GET", "/api/events": "POST"}
ALLOWED_HEADERS = ("Authorization", "Content-Type")
MAX_AGE_S = 600
ANY = "*"


@dataclass(frozen=True)
class CorsPolicy:
    origins: tuple[str, ...]

    @property
    def wildcard(self) -> bool:
        return ANY in self.origins

    def allowed_origin(self, origin: str | None) -> str | None:
        """The value of Access-Control-Allow-Origin for a request from `origin`, or None."""
        if not origin or not self.origins:
            return None
        if self.wildcard:
            return ANY
        return origin if origin.lower() in self.origins else None

    def refusal(self, origin: str | None, path: str, method: str, headers: list[str]) -> str | None:
        """Why a preflight is refused, or None when it is allowed."""
        if self.allowed_origin(origin) is None:
            return f"origin {origin!r} is not allowed to call this API (CORS_ORIGINS)"
        if method.upper() != PUBLIC_API[path]:
            return f"method {method!r} is not allowed on {path}; use {PUBLIC_API[path]}"
        allowed = {h.lower() for h in ALLOWED_HEADERS}
        extra = [h for h in headers if h.lower() not in allowed]
        if extra:
            return f"request header {extra[0]!r} is not allowed; only {', '.join(ALLOWED_HEADERS)}"
        return None


def requested_headers() -> list[str]:
    raw = request.headers.get("Access-Control-Request-Headers", "")
    return [h.strip() for h in raw.split(",") if h.strip()]


def install_cors(app: Flask, origins: tuple[str, ...]) -> CorsPolicy:
    """Answer preflights and add the CORS headers on the public API paths of `app`."""
    policy = CorsPolicy(origins)

    @app.before_request
    def cors_preflight():
        if request.method != "OPTIONS" or request.path not in PUBLIC_API \
                or "Access-Control-Request-Method" not in request.headers:
            return None
        origin = request.headers.get("Origin")
        reason = policy.refusal(origin, request.path, request.headers["Access-Control-Request-Method"],
                                requested_headers())
        if reason is not None:
            return jsonify({"error": reason}), 403
        response = Response(status=204)
        response.headers["Access-Control-Allow-Methods"] = PUBLIC_API[request.path]
        response.headers["Access-Control-Allow-Headers"] = ", ".join(ALLOWED_HEADERS)
        response.headers["Access-Control-Max-Age"] = str(MAX_AGE_S)
        return response

    if not policy.origins:
        return policy   # same-origin only: no response ever gets a CORS header (preflights are refused above)

    @app.after_request
    def cors_headers(response: Response) -> Response:
        if request.path not in PUBLIC_API:
            return response
        allowed = policy.allowed_origin(request.headers.get("Origin"))
        if allowed is not None:
            response.headers["Access-Control-Allow-Origin"] = allowed
        if not policy.wildcard:
            response.vary.add("Origin")
        return response

    return policy
