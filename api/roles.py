"""Which roles a /api/search caller has: verified credentials only, never a query parameter.

Restricted tasks (a task with `roles`) are shown only to callers whose roles are *verified*,
by one of two means a host platform chooses between:

1. A signed role token, sent as `Authorization: Bearer <token>` or `?role_token=<token>`: a JSON
   Web Token (RFC 7519) signed with HS256 (HMAC-SHA256) under ROLE_TOKEN_SECRET, whose claims are

       {"roles": ["fiscal", ...], "iat": <unix seconds>, "exp": <unix seconds>, "aud": ROLE_TOKEN_AUDIENCE}

   all four required, and optionally `"sub": "<the host's user id>"` (RFC 7519 section 4.1.2), a
   string of at most MAX_SUBJECT_CHARS naming the person: learning from use counts distinct
   verified people (analytics.sources.person_pseudonym; docs/learning-from-use.md), so that
   staff behind one office address are not one voter. PyJWT verifies it with the algorithm
   pinned to HS256 (`alg: none` or any
   other algorithm is refused), the audience checked and the claims required; we add that the
   token lives at most ROLE_TOKEN_MAX_TTL_S (exp - iat) and was not issued in the future: hosts
   mint a short-lived token per user session or page load, and a leaked token dies quickly.
   Any JWT library mints one (docs/role-tokens.md: Python, Node, Java); `sign_role_token` is
   ours (and `python app.py tokens role-token`).

2. A header set by a trusted reverse proxy (TRUSTED_ROLE_HEADER, e.g. `X-Taskfinder-Roles:
   fiscal,director`), honoured only when the TCP peer (`remote_addr`) is in TRUSTED_PROXIES.
   The proxy must overwrite or strip that header on what clients send it. It may name the person
   in TRUSTED_USER_HEADER (e.g. `X-Taskfinder-User: 4711`), the counterpart of `sub`.

A presented token decides (valid: its roles; invalid: none); without a token the trusted
header is read; without either the caller sees unrestricted tasks only. Why a rejected
credential was rejected (forged, expired, malformed, too long-lived) is never told to the
caller, who gets a generic note; hosts debug with `verify_role_token` on their side.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Iterable, Mapping

import jwt

from web.clients import is_trusted_proxy

MAX_TOKEN_CHARS = 4096          # refuse to decode anything bigger (cheap DoS guard)
MAX_ROLES = 64
MAX_SUBJECT_CHARS = 256        # the `sub` claim (or TRUSTED_USER_HEADER): the host's user id
ROLE_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
CLOCK_SKEW_S = 30               # tolerated clock difference between the host and us
ALGORITHMS = ["HS256"]          # pinned: a token naming any other algorithm (or none) is refused
DEFAULT_AUDIENCE = "taskfinder"  # ROLE_TOKEN_AUDIENCE's default
REQUIRED_CLAIMS = {"roles": "a roles list", "exp": "an integer exp", "iat": "an integer iat", "aud": "an aud"}

NONE, VERIFIED, REJECTED = "none", "verified", "rejected"


class InvalidRoleToken(ValueError):
    """A role token that must not be trusted. The message is for logs and hosts, not callers."""


@dataclass(frozen=True)
class Access:
    """The caller's verified roles and how they were established (none/verified/rejected), and
    the verified person (`sub`, or the trusted proxy's user header) when the credential names one."""

    roles: frozenset[str] = frozenset()
    credential: str = NONE
    subject: str | None = None


ANONYMOUS = Access()


def valid_roles(roles: Iterable[str]) -> frozenset[str]:
    """The roles as a set, or InvalidRoleToken if any is not a short plain identifier."""
    roles = list(roles)
    if len(roles) > MAX_ROLES or not all(isinstance(r, str) and ROLE_PATTERN.match(r) for r in roles):
        raise InvalidRoleToken("roles must be a short list of identifiers")
    return frozenset(roles)


def valid_subject(subject) -> str:
    """The person a credential names, or InvalidRoleToken unless it is a non-blank string of at
    most MAX_SUBJECT_CHARS printable characters."""
    if not isinstance(subject, str) or not subject.strip() or len(subject) > MAX_SUBJECT_CHARS \
            or not subject.isprintable():
        raise InvalidRoleToken(f"sub must be a non-blank string of at most {MAX_SUBJECT_CHARS} printable characters")
    return subject


def sign_role_token(secret: str, roles: Iterable[str], ttl_s: int, now: float | None = None,
                    audience: str = DEFAULT_AUDIENCE, subject: str | None = None) -> str:
    """A JWT (HS256) granting `roles` for `ttl_s` seconds, naming `subject` when given (the claims
    are in the module docstring)."""
    if not secret:
        raise ValueError("ROLE_TOKEN_SECRET is not set")
    issued = int(time.time() if now is None else now)
    claims = {"roles": sorted(valid_roles(roles)), "iat": issued, "exp": issued + int(ttl_s), "aud": audience}
    if subject is not None:
        claims["sub"] = valid_subject(subject)
    return jwt.encode(claims, secret, algorithm=ALGORITHMS[0])


def _claims(secret: str, token: str, audience: str, check_clock: bool) -> dict:
    """The claims of a token PyJWT accepts (signature, algorithm, audience, required claims, and
    exp/iat against the clock when `check_clock`), or InvalidRoleToken saying why not."""
    clock = {"verify_exp": check_clock, "verify_iat": check_clock, "verify_nbf": check_clock}
    try:
        return jwt.decode(token, secret, algorithms=ALGORITHMS, audience=audience, leeway=CLOCK_SKEW_S,
                          options={"require": list(REQUIRED_CLAIMS), **clock})
    except jwt.MissingRequiredClaimError as exc:
        raise InvalidRoleToken(f"payload needs {REQUIRED_CLAIMS.get(exc.claim, exc.claim)}") from exc
    except jwt.InvalidAlgorithmError as exc:
        raise InvalidRoleToken(f"algorithm not allowed (only {ALGORITHMS})") from exc
    except jwt.InvalidSignatureError as exc:
        raise InvalidRoleToken("bad signature") from exc
    except jwt.InvalidAudienceError as exc:
        raise InvalidRoleToken(f"wrong audience (expected {audience!r})") from exc
    except jwt.ExpiredSignatureError as exc:
        raise InvalidRoleToken("expired") from exc
    except jwt.ImmatureSignatureError as exc:
        raise InvalidRoleToken("issued in the future") from exc
    except jwt.DecodeError as exc:
        if "payload" in str(exc):
            raise InvalidRoleToken("payload must be a JSON object with a roles list") from exc
        raise InvalidRoleToken(f"malformed token (a JWT is three base64url segments): {exc}") from exc
    except jwt.InvalidTokenError as exc:
        raise InvalidRoleToken(f"invalid token: {exc}") from exc


def verify_role_token(secret: str, token: str, max_ttl_s: int, now: float | None = None,
                      audience: str = DEFAULT_AUDIENCE) -> frozenset[str]:
    """The roles a token grants, or InvalidRoleToken saying why not (verify_role_claims)."""
    return verify_role_claims(secret, token, max_ttl_s, now, audience).roles


def verify_role_claims(secret: str, token: str, max_ttl_s: int, now: float | None = None,
                       audience: str = DEFAULT_AUDIENCE) -> Access:
    """The roles and the person (`sub`, optional) a token verifies, or InvalidRoleToken saying why not.

    PyJWT checks the signature (before it interprets anything an attacker wrote), the pinned
    algorithm, the audience and the required claims; then the claims' types, the lifetime
    (exp - iat <= max_ttl_s) and the times against `now` (the clock, or a given instant)."""
    if not secret:
        raise InvalidRoleToken("role tokens are not configured (ROLE_TOKEN_SECRET)")
    if len(token) > MAX_TOKEN_CHARS:
        raise InvalidRoleToken("malformed token (too long)")
    claims = _claims(secret, token, audience, check_clock=now is None)
    if not isinstance(claims["roles"], list):
        raise InvalidRoleToken("payload needs a roles list")
    for name in ("exp", "iat"):
        if isinstance(claims[name], bool) or not isinstance(claims[name], int):
            raise InvalidRoleToken(f"payload needs {REQUIRED_CLAIMS[name]}")
    exp, issued = claims["exp"], claims["iat"]
    now = time.time() if now is None else now
    if now > exp + CLOCK_SKEW_S:
        raise InvalidRoleToken("expired")
    if issued > now + CLOCK_SKEW_S:
        raise InvalidRoleToken("issued in the future")
    if exp - issued > max_ttl_s:
        raise InvalidRoleToken(f"lives longer than ROLE_TOKEN_MAX_TTL_S={max_ttl_s} (exp - iat = {exp - issued} s)")
    subject = valid_subject(claims["sub"]) if "sub" in claims else None
    return Access(valid_roles(claims["roles"]), VERIFIED, subject)


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

    `settings` provides role_token_secret, role_token_max_ttl_s, role_token_audience,
    trusted_role_header, trusted_user_header and trusted_proxies. Never raises on bad input: a
    bad credential is `REJECTED`, no roles and no person."""
    token = bearer_token(headers.get("Authorization")) or (args.get("role_token") or None)
    if token is not None:
        try:
            return verify_role_claims(settings.role_token_secret, token, settings.role_token_max_ttl_s, now,
                                      settings.role_token_audience)
        except InvalidRoleToken:
            return Access(credential=REJECTED)
    header, user = headers.get(settings.trusted_role_header), headers.get(settings.trusted_user_header)
    if (header is None and user is None) or not is_trusted_proxy(remote_addr, settings.trusted_proxies):
        return ANONYMOUS
    try:
        return Access(parse_role_header(header or ""), VERIFIED, valid_subject(user) if user is not None else None)
    except InvalidRoleToken:
        return Access(credential=REJECTED)
