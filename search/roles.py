"""Which roles a /api/search caller has: verified credentials only, never a query parameter.

Restricted tasks (a task with `roles`) are shown only to callers whose roles are *verified*,
by one of two means a host platform chooses between:

1. A signed role token, sent as `Authorization: Bearer <token>` or `?role_token=<token>`:

       token   = base64url(payload) + "." + base64url(HMAC-SHA256(ROLE_TOKEN_SECRET, base64url(payload)))
       payload = JSON object {"roles": ["fiscal", ...], "exp": <unix seconds>}

   base64url is RFC 4648 section 5 without "=" padding; the MAC covers the payload *segment*
   exactly as sent (its ASCII bytes), so no JSON canonicalisation is needed. A token is valid
   while now <= exp, and only if exp is at most ROLE_TOKEN_MAX_TTL_S in the future: hosts
   mint a short-lived token per user session or page load, and a leaked token dies quickly.
   `sign_role_token` is the reference implementation (and `python app.py tokens role-token`).

2. A header set by a trusted reverse proxy (TRUSTED_ROLE_HEADER, e.g. `X-Taskfinder-Roles:
   fiscal,director`), honoured only when the TCP peer (`remote_addr`) is in TRUSTED_PROXIES.
   The proxy must overwrite or strip that header on what clients send it.

A presented token decides (valid: its roles; invalid: none); without a token the trusted
header is read; without either the caller sees unrestricted tasks only. Why a rejected
credential was rejected (forged, expired, malformed, too long-lived) is never told to the
caller, who gets a generic note; hosts debug with `verify_role_token` on their side.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import time
from dataclasses import dataclass
from typing import Iterable, Mapping

from infra.clients import is_trusted_proxy

MAX_TOKEN_CHARS = 4096          # refuse to decode anything bigger (cheap DoS guard)
MAX_ROLES = 64
ROLE_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
CLOCK_SKEW_S = 30               # tolerated clock difference between the host and us

NONE, VERIFIED, REJECTED = "none", "verified", "rejected"


class InvalidRoleToken(ValueError):
    """A role token that must not be trusted. The message is for logs and hosts, not callers."""


@dataclass(frozen=True)
class Access:
    """The caller's verified roles and how they were established (none/verified/rejected)."""

    roles: frozenset[str] = frozenset()
    credential: str = NONE


ANONYMOUS = Access()


def _b64encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    if not re.fullmatch(r"[A-Za-z0-9_-]*", text):
        raise InvalidRoleToken("not base64url")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise InvalidRoleToken("not base64url") from exc


def _mac(secret: str, payload_segment: str) -> bytes:
    return hmac.new(secret.encode("utf-8"), payload_segment.encode("ascii"), hashlib.sha256).digest()


def valid_roles(roles: Iterable[str]) -> frozenset[str]:
    """The roles as a set, or InvalidRoleToken if any is not a short plain identifier."""
    roles = list(roles)
    if len(roles) > MAX_ROLES or not all(isinstance(r, str) and ROLE_PATTERN.match(r) for r in roles):
        raise InvalidRoleToken("roles must be a short list of identifiers")
    return frozenset(roles)


def sign_role_token(secret: str, roles: Iterable[str], ttl_s: int, now: float | None = None) -> str:
    """A token granting `roles` for `ttl_s` seconds (the format is in the module docstring)."""
    if not secret:
        raise ValueError("ROLE_TOKEN_SECRET is not set")
    exp = int((time.time() if now is None else now) + ttl_s)
    payload = json.dumps({"roles": sorted(valid_roles(roles)), "exp": exp}, separators=(",", ":"))
    segment = _b64encode(payload.encode("utf-8"))
    return f"{segment}.{_b64encode(_mac(secret, segment))}"


def verify_role_token(secret: str, token: str, max_ttl_s: int, now: float | None = None) -> frozenset[str]:
    """The roles a token grants, or InvalidRoleToken saying why not.

    Order matters: the MAC is checked (in constant time) before the payload is parsed, so
    nothing an attacker wrote is interpreted unless it was signed with our secret."""
    if not secret:
        raise InvalidRoleToken("role tokens are not configured (ROLE_TOKEN_SECRET)")
    if len(token) > MAX_TOKEN_CHARS or token.count(".") != 1:
        raise InvalidRoleToken("malformed token")
    segment, signature = token.split(".")
    if not hmac.compare_digest(_b64decode(signature), _mac(secret, segment)):
        raise InvalidRoleToken("bad signature")
    try:
        payload = json.loads(_b64decode(segment))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidRoleToken("payload is not JSON") from exc
    if not isinstance(payload, dict) or not isinstance(payload.get("roles"), list):
        raise InvalidRoleToken("payload needs a roles list")
    exp = payload.get("exp")
    if isinstance(exp, bool) or not isinstance(exp, int):
        raise InvalidRoleToken("payload needs an integer exp")
    now = time.time() if now is None else now
    if now > exp + CLOCK_SKEW_S:
        raise InvalidRoleToken("expired")
    if exp - now > max_ttl_s + CLOCK_SKEW_S:
        raise InvalidRoleToken(f"lives longer than ROLE_TOKEN_MAX_TTL_S={max_ttl_s}")
    return valid_roles(payload["roles"])


def bearer_token(authorization: str | None) -> str | None:
    """The credential of an `Authorization: Bearer <token>` header, else None."""
    scheme, _, credential = (authorization or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not credential.strip():
        return None
    return credential.strip()


def parse_role_header(value: str) -> frozenset[str]:
    """`fiscal, director` -> {"fiscal", "director"}; InvalidRoleToken on anything else."""
    return valid_roles(part.strip() for part in value.split(",") if part.strip())


def resolve_access(settings, headers: Mapping[str, str], args: Mapping[str, str],
                   remote_addr: str | None, now: float | None = None) -> Access:
    """The caller's verified roles from a request's headers, query and peer address.

    `settings` provides role_token_secret, role_token_max_ttl_s, trusted_role_header and
    trusted_proxies. Never raises on bad input: a bad credential is `REJECTED`, no roles."""
    token = bearer_token(headers.get("Authorization")) or (args.get("role_token") or None)
    if token is not None:
        try:
            roles = verify_role_token(settings.role_token_secret, token, settings.role_token_max_ttl_s, now)
        except InvalidRoleToken:
            return Access(credential=REJECTED)
        return Access(roles, VERIFIED)
    header = headers.get(settings.trusted_role_header)
    if header is None or not is_trusted_proxy(remote_addr, settings.trusted_proxies):
        return ANONYMOUS
    try:
        return Access(parse_role_header(header), VERIFIED)
    except InvalidRoleToken:
        return Access(credential=REJECTED)
