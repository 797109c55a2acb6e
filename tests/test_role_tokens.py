"""Verified roles for /api/search (api/roles.py): the signed token format (a JWT, HS256), the
trusted proxy header, and what the API shows with a valid, forged, expired or malformed credential."""
import base64
import hashlib
import hmac
import json
import time

import jwt
import pytest

from web.clients import is_trusted_proxy
from api.roles import (ANONYMOUS, MAX_SUBJECT_CHARS, Access, REJECTED, VERIFIED, InvalidRoleToken, resolve_access,
                       sign_role_token, verify_role_claims, verify_role_token)
from settings import Settings
from tests.conftest import build_app, make_settings

SECRET = "s3cret-for-tests-only-0123456789abcdef"
NOW = 1_800_000_000
CLAIM = "nutrition.cacfp-claim"  # restricted to the fiscal role in the demo catalog


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


AUD = "taskfinder"
HEADER = {"alg": "HS256", "typ": "JWT"}


def signed(header: dict, payload_segment: str, secret=SECRET) -> str:
    """header.payload.signature, the signature an HMAC-SHA256 over the first two segments (RFC 7515)."""
    signing_input = f"{b64(json.dumps(header).encode())}.{payload_segment}"
    return f"{signing_input}.{b64(hmac.new(secret.encode(), signing_input.encode(), hashlib.sha256).digest())}"


def handmade(payload, secret=SECRET, header=HEADER) -> str:
    """A JWT built from the documented format alone with the standard library, as a host platform
    without a JWT library would; `aud` and `iat` are filled in when the payload (a dict) lacks them."""
    if isinstance(payload, dict):
        payload = {"aud": AUD, "iat": NOW, **payload}
    return signed(header, b64(json.dumps(payload).encode()), secret)


# -- the format ------------------------------------------------------------------------------
def test_a_signed_token_round_trips_and_matches_the_documented_format():
    token = sign_role_token(SECRET, ["fiscal", "director"], ttl_s=300, now=NOW)
    assert verify_role_token(SECRET, token, max_ttl_s=900, now=NOW) == {"fiscal", "director"}
    segment = token.split(".")[1]
    assert json.loads(base64.urlsafe_b64decode(segment + "==")) == \
        {"roles": ["director", "fiscal"], "iat": NOW, "exp": NOW + 300, "aud": AUD}
    assert verify_role_token(SECRET, handmade({"roles": ["fiscal"], "exp": NOW + 60}), 900, now=NOW) == {"fiscal"}


@pytest.mark.parametrize("token, why", [
    (handmade({"roles": ["fiscal"], "exp": NOW + 60}, secret="another-secret-of-enough-length-000000"), "signature"),
    (handmade({"roles": ["fiscal"], "exp": NOW - 120}), "expired"),
    (handmade({"roles": ["fiscal"], "exp": NOW + 3600}), "longer than"),
    (handmade({"roles": "fiscal", "exp": NOW + 60}), "roles list"),
    (handmade({"roles": ["fiscal"]}), "integer exp"),
    (handmade({"roles": ["fiscal"], "exp": float(NOW + 60)}), "integer exp"),
    (handmade({"roles": ["fiscal"], "exp": True}), "integer exp"),
    (handmade({"roles": ["fis cal"], "exp": NOW + 60}), "identifiers"),
    (handmade({"roles": [f"r{i}" for i in range(65)], "exp": NOW + 60}), "identifiers"),
    (handmade(["fiscal"]), "roles list"),
    ("", "malformed"),
    ("no-dot-at-all", "malformed"),
    ("a.b.c", "malformed"),
    ("e30.e30.!!!", "base64url"),
    ("x" * 5000 + ".y", "malformed"),
])
def test_bad_tokens_are_refused_with_a_reason_for_logs(token, why):
    with pytest.raises(InvalidRoleToken, match=why):
        verify_role_token(SECRET, token, max_ttl_s=900, now=NOW)


def test_a_tampered_payload_fails_the_signature():
    header, _payload, signature = sign_role_token(SECRET, ["teacher"], ttl_s=300, now=NOW).split(".")
    claims = {"roles": ["fiscal"], "iat": NOW, "exp": NOW + 300, "aud": AUD}
    forged = f"{header}.{b64(json.dumps(claims).encode())}.{signature}"
    with pytest.raises(InvalidRoleToken, match="signature"):
        verify_role_token(SECRET, forged, 900, now=NOW)


def minted(secret=SECRET, algorithm="HS256", **claims) -> str:
    """A token minted by PyJWT, as a Python host would (docs/role-tokens.md)."""
    return jwt.encode({"roles": ["fiscal"], "iat": NOW, "exp": NOW + 300, "aud": AUD, **claims}, secret,
                      algorithm=algorithm)


def test_a_jwt_minted_by_pyjwt_with_the_shared_secret_is_accepted():
    assert verify_role_token(SECRET, minted(), 900, now=NOW) == {"fiscal"}
    assert verify_role_token(SECRET, minted(aud=["other", AUD]), 900, now=NOW) == {"fiscal"}  # RFC 7519: a list
    assert verify_role_token(SECRET, minted(aud="portal"), 900, now=NOW, audience="portal") == {"fiscal"}
    live = jwt.encode({"roles": ["fiscal"], "iat": int(time.time()), "exp": int(time.time()) + 60, "aud": AUD},
                      SECRET, algorithm="HS256")
    assert verify_role_token(SECRET, live, 900) == {"fiscal"}   # against the real clock, as the API does


def unsigned(claims: dict) -> str:
    """`alg: none`: a header, the claims and an empty signature."""
    return f"{b64(json.dumps({'alg': 'none', 'typ': 'JWT'}).encode())}.{b64(json.dumps(claims).encode())}."


@pytest.mark.parametrize("token, why", [
    (unsigned({"roles": ["fiscal"], "iat": NOW, "exp": NOW + 60, "aud": AUD}), "algorithm"),
    (handmade({"roles": ["fiscal"], "exp": NOW + 60}, header={"alg": "None", "typ": "JWT"}), "algorithm"),
    (minted(algorithm="HS512"), "algorithm"),
    (minted(aud="another-product"), "audience"),
    (minted(iat=NOW - 700, exp=NOW - 400), "expired"),
    (minted(exp=NOW + 901), "longer than"),
    (minted(iat=NOW - 600, exp=NOW + 400), "longer than"),     # still valid now, but minted to live 1000 s
    (minted(iat=NOW + 600, exp=NOW + 700), "in the future"),
    (minted(secret="the-wrong-key-of-enough-length-00000000"), "signature"),
    (jwt.encode({"roles": ["fiscal"], "iat": NOW, "exp": NOW + 60}, SECRET), "aud"),
    (jwt.encode({"roles": ["fiscal"], "exp": NOW + 60, "aud": AUD}, SECRET), "integer iat"),
    (jwt.encode({"roles": ["fiscal"], "iat": NOW, "aud": AUD}, SECRET), "integer exp"),
    (jwt.encode({"iat": NOW, "exp": NOW + 60, "aud": AUD}, SECRET), "roles list"),
])
def test_pyjwt_tokens_that_break_a_rule_are_refused(token, why):
    with pytest.raises(InvalidRoleToken, match=why):
        verify_role_token(SECRET, token, max_ttl_s=900, now=NOW)


def test_against_the_real_clock_an_expired_or_wrong_audience_jwt_is_refused():
    now = int(time.time())
    expired = jwt.encode({"roles": ["fiscal"], "iat": now - 200, "exp": now - 100, "aud": AUD}, SECRET)
    with pytest.raises(InvalidRoleToken, match="expired"):
        verify_role_token(SECRET, expired, 900)
    with pytest.raises(InvalidRoleToken, match="audience"):
        verify_role_token(SECRET, jwt.encode({"roles": ["fiscal"], "iat": now, "exp": now + 60, "aud": "x"}, SECRET), 900)


def test_a_signed_payload_that_is_not_json_is_refused_not_a_crash():
    token = signed(HEADER, b64(b"\xff\xfe not json"))
    with pytest.raises(InvalidRoleToken, match="JSON"):
        verify_role_token(SECRET, token, 900, now=NOW)


def test_without_a_secret_nothing_verifies_and_nothing_signs():
    with pytest.raises(InvalidRoleToken, match="not configured"):
        verify_role_token("", handmade({"roles": ["fiscal"], "exp": NOW + 60}, secret=""), 900, now=NOW)
    with pytest.raises(ValueError):
        sign_role_token("", ["fiscal"], 60)


# -- where roles come from ---------------------------------------------------------------------
@pytest.mark.parametrize("address, trusted", [
    ("10.1.2.3", True), ("10.255.0.1", True), ("192.168.0.10", True), ("192.168.0.11", False),
    ("::1", True), ("203.0.113.9", False), ("", False), (None, False), ("unix:/tmp/sock", False),
])
def test_trusted_proxies_are_addresses_or_networks(address, trusted):
    assert is_trusted_proxy(address, ("10.0.0.0/8", "192.168.0.10/32", "::1/128")) is trusted


def role_settings(**env) -> Settings:
    return Settings.from_env({"ROLE_TOKEN_SECRET": SECRET, "TRUSTED_PROXIES": "10.0.0.0/8", **env})


def test_a_presented_token_decides_and_the_header_needs_a_trusted_peer():
    settings = role_settings()
    token = sign_role_token(SECRET, ["fiscal"], 60, now=NOW)
    header = {"X-Taskfinder-Roles": "director, teacher"}
    assert resolve_access(settings, {"Authorization": f"Bearer {token}", **header}, {}, "10.0.0.1", now=NOW).roles \
        == {"fiscal"}
    assert resolve_access(settings, {}, {"role_token": token}, "203.0.113.9", now=NOW).credential == VERIFIED
    assert resolve_access(settings, {"Authorization": "Bearer nope", **header}, {}, "10.0.0.1", now=NOW).credential \
        == REJECTED
    assert resolve_access(settings, header, {}, "10.0.0.1", now=NOW).roles == {"director", "teacher"}
    assert resolve_access(settings, header, {}, "203.0.113.9", now=NOW) == ANONYMOUS
    assert resolve_access(settings, {"X-Taskfinder-Roles": "a b"}, {}, "10.0.0.1", now=NOW).credential == REJECTED
    assert resolve_access(settings, {"Authorization": "Basic dXNlcjpwYXNz"}, {}, "10.0.0.1", now=NOW) == ANONYMOUS
    custom = role_settings(TRUSTED_ROLE_HEADER="X-Roles")
    assert resolve_access(custom, {"X-Roles": "fiscal"}, {}, "10.0.0.1", now=NOW).roles == {"fiscal"}
    assert resolve_access(custom, header, {}, "10.0.0.1", now=NOW) == ANONYMOUS


def test_a_token_may_name_the_person_and_a_bad_sub_is_refused_whole():
    """The optional `sub` (RFC 7519 4.1.2): learning counts distinct verified people by it."""
    token = sign_role_token(SECRET, ["fiscal"], 60, now=NOW, subject="staff-4711")
    assert json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))["sub"] == "staff-4711"
    access = verify_role_claims(SECRET, token, 900, now=NOW)
    assert (access.roles, access.credential, access.subject) == ({"fiscal"}, VERIFIED, "staff-4711")
    assert verify_role_claims(SECRET, sign_role_token(SECRET, ["fiscal"], 60, now=NOW), 900, now=NOW).subject is None
    settings = role_settings()
    assert resolve_access(settings, {"Authorization": f"Bearer {token}"}, {}, None, now=NOW).subject == "staff-4711"
    for sub in (4711, "", "   ", "x" * (MAX_SUBJECT_CHARS + 1), "line\nbreak", ["a"]):
        forged = handmade({"roles": ["fiscal"], "exp": NOW + 60, "sub": sub})
        with pytest.raises(InvalidRoleToken, match=r"(?i)sub(ject)? must be"):
            verify_role_token(SECRET, forged, 900, now=NOW)
        assert resolve_access(settings, {"Authorization": f"Bearer {forged}"}, {}, None, now=NOW) == \
            resolve_access(settings, {"Authorization": "Bearer nope"}, {}, None, now=NOW)   # REJECTED, nobody
    with pytest.raises(InvalidRoleToken):
        sign_role_token(SECRET, ["fiscal"], 60, now=NOW, subject="")


def test_the_trusted_proxy_may_name_the_person_and_nobody_else_can():
    settings = role_settings()
    user = {"X-Taskfinder-User": "staff-4711"}
    assert resolve_access(settings, user, {}, "10.0.0.1", now=NOW) == Access(frozenset(), VERIFIED, "staff-4711")
    both = resolve_access(settings, {**user, "X-Taskfinder-Roles": "fiscal"}, {}, "10.0.0.1", now=NOW)
    assert (both.roles, both.subject) == ({"fiscal"}, "staff-4711")
    assert resolve_access(settings, user, {}, "203.0.113.9", now=NOW) == ANONYMOUS      # not a trusted peer
    assert resolve_access(settings, {"X-Taskfinder-User": " "}, {}, "10.0.0.1", now=NOW).credential == REJECTED
    custom = role_settings(TRUSTED_USER_HEADER="X-User")
    assert resolve_access(custom, {"X-User": "ana"}, {}, "10.0.0.1", now=NOW).subject == "ana"
    assert resolve_access(custom, user, {}, "10.0.0.1", now=NOW) == ANONYMOUS


# -- through the API ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def client(tmp_path_factory, shared_cache_dir, demo_tasks, demo_cases):
    settings = make_settings(tmp_path_factory.mktemp("roles"), shared_cache_dir, ROLE_TOKEN_SECRET=SECRET,
                             TRUSTED_PROXIES="10.0.0.0/8", ROLE_TOKEN_MAX_TTL_S=600)
    return build_app(settings, demo_tasks, demo_cases).test_client()


def search(client, headers=None, address="203.0.113.9", **params):
    params = {"q": "CACFP monthly claim", "k": 10, **params}
    return client.get("/api/search", query_string=params, headers=headers or {},
                      environ_base={"REMOTE_ADDR": address})


def ids(response):
    return [r["id"] for r in response.get_json()["results"]]


def bearer(roles, ttl=300):
    return {"Authorization": f"Bearer {sign_role_token(SECRET, roles, ttl)}"}


def test_a_valid_token_shows_its_roles_tasks(client):
    response = search(client, headers=bearer(["fiscal"]))
    body = response.get_json()
    assert ids(response)[0] == CLAIM
    assert body["roles"] == ["fiscal"] and body["access"] == {"credential": "verified"}
    assert response.headers["Cache-Control"] == "private, no-store"
    by_query = search(client, role_token=sign_role_token(SECRET, ["fiscal"], 300))
    assert ids(by_query)[0] == CLAIM


def test_several_roles_see_every_task_sharing_one_and_role_narrows_to_one_of_them(client):
    assert CLAIM in ids(search(client, headers=bearer(["teacher", "fiscal"])))
    narrowed = search(client, headers=bearer(["teacher", "fiscal"]), role="teacher")
    assert CLAIM not in ids(narrowed) and narrowed.get_json()["role"] == "teacher"
    picked = search(client, headers=bearer(["teacher", "fiscal"]), role="fiscal")
    assert ids(picked)[0] == CLAIM and picked.get_json()["role"] == "fiscal"
    widened = search(client, headers=bearer(["teacher"]), role="fiscal").get_json()
    assert CLAIM not in [r["id"] for r in widened["results"]] and widened["role"] is None


@pytest.mark.parametrize("credential", [
    handmade({"roles": ["fiscal"], "iat": int(time.time()), "exp": int(time.time()) + 60},
             secret="a-different-secret-000000000000000000"),
    handmade({"roles": ["fiscal"], "iat": int(time.time()) - 3660, "exp": int(time.time()) - 3600}),
    handmade({"roles": ["fiscal"], "iat": int(time.time()), "exp": int(time.time()) + 86400}),
    "garbage", "a.b", "%%%.%%%", "x" * 10000,
])
def test_forged_expired_or_malformed_tokens_see_unrestricted_tasks_only(client, credential):
    for response in (search(client, headers={"Authorization": f"Bearer {credential}"}),
                     search(client, role_token=credential)):
        assert response.status_code == 200
        body = response.get_json()
        assert CLAIM not in ids(response) and body["roles"] == []
        assert body["access"]["credential"] == "rejected"
        note = body["access"]["note"]
        assert "fiscal" not in note and not {"expired", "signature", "malformed"} & set(note.split())


def test_the_trusted_header_counts_only_from_a_trusted_proxy(client):
    header = {"X-Taskfinder-Roles": "fiscal"}
    assert ids(search(client, headers=header, address="10.20.30.40"))[0] == CLAIM
    assert CLAIM not in ids(search(client, headers=header, address="203.0.113.9"))


def test_verified_responses_match_the_openapi_spec(client):
    from jsonschema import Draft202012Validator

    from settings import PROJECT_ROOT

    spec = json.loads((PROJECT_ROOT / "openapi.json").read_text())
    validator = Draft202012Validator({"$ref": "#/components/schemas/SearchResponse", "components": spec["components"]})
    validator.validate(search(client, headers=bearer(["fiscal"])).get_json())
    validator.validate(search(client, role_token="bad").get_json())
    validator.validate(search(client, role="fiscal").get_json())
    parameters = {p["name"] for p in spec["paths"]["/api/search"]["get"]["parameters"]}
    assert {"role", "role_token"} <= parameters


def test_cli_role_token_prints_a_token_the_api_accepts(tmp_path, shared_cache_dir):
    from app import create_app

    app = create_app(make_settings(tmp_path, shared_cache_dir, ROLE_TOKEN_SECRET=SECRET, ROLE_TOKEN_MAX_TTL_S=600))
    runner = app.test_cli_runner()
    result = runner.invoke(args=["tokens", "role-token", "--roles", "fiscal,director", "--roles", "teacher",
                                 "--ttl", "300"])
    assert result.exit_code == 0, result.output
    assert verify_role_token(SECRET, result.output.strip(), 600) == {"fiscal", "director", "teacher"}
    too_long = runner.invoke(args=["tokens", "role-token", "--roles", "fiscal", "--ttl", "601"])
    assert too_long.exit_code != 0 and "ROLE_TOKEN_MAX_TTL_S" in too_long.output
    bad = runner.invoke(args=["tokens", "role-token", "--roles", "fis cal"])
    assert bad.exit_code != 0
    named = runner.invoke(args=["tokens", "role-token", "--roles", "fiscal", "--subject", "staff-4711"])
    assert verify_role_claims(SECRET, named.output.strip(), 600).subject == "staff-4711"
    blank = runner.invoke(args=["tokens", "role-token", "--roles", "fiscal", "--subject", " "])
    assert blank.exit_code != 0 and "--subject" in blank.output
    unset = create_app(make_settings(tmp_path / "unset", shared_cache_dir)).test_cli_runner()
    assert "ROLE_TOKEN_SECRET" in unset.invoke(args=["tokens", "role-token", "--roles", "fiscal"]).output
