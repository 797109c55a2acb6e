"""The demo homepage's role switcher: which secret signs its role tokens, and when it is on.

A visitor of the demo picks a role and the server mints a short-lived role token for it
(api.roles.sign_role_token), so the demo can show the 40 restricted tasks of its catalog.
Minting tokens for anyone is exactly what a production deployment must never do, so:

- it is on only with DEMO_HOMEPAGE *and* DEMO_ROLE_SWITCHER (off by default; `make run`, the
  demo, turns it on): leaving the demo homepage on in production does not turn it on;
- its tokens are signed with a demo-only secret, never with ROLE_TOKEN_SECRET: a token minted
  here is worthless to any other deployment, and one minted by a host with ROLE_TOKEN_SECRET
  is verified as before. The demo secret is derived from SECRET_KEY when one is set (every
  worker of one deployment derives the same), else random per process;
- /api/search accepts a demo-signed token only while the switcher is on (api.search), and its
  lifetime is at most DEMO_TOKEN_TTL_S (and ROLE_TOKEN_MAX_TTL_S).
"""
from __future__ import annotations

import hashlib
import hmac
import secrets

EXTENSION = "demo_role_secret"   # app.extensions key: the secret, present only while the switcher is on
DEMO_TOKEN_TTL_S = 300


def switcher_enabled(settings) -> bool:
    return bool(settings.demo_homepage and settings.demo_role_switcher)


def demo_secret(secret_key: str) -> str:
    """The secret that signs the switcher's tokens: HMAC-SHA256(SECRET_KEY, purpose) when a
    SECRET_KEY is set (shared by the workers of a deployment, and unlike ROLE_TOKEN_SECRET),
    else 32 random bytes for this process."""
    if secret_key:
        return hmac.new(secret_key.encode("utf-8"), b"taskfinder demo role tokens", hashlib.sha256).hexdigest()
    return secrets.token_hex(32)


def token_ttl_s(settings) -> int:
    return min(DEMO_TOKEN_TTL_S, settings.role_token_max_ttl_s)
