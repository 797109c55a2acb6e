"""Accounts on SQLite and PostgreSQL: migration 0003, argon2 passwords, roles, session epochs,
API tokens (only digests stored), and the audit entries every change writes."""
from datetime import timedelta

import pytest
from argon2 import PasswordHasher
from sqlalchemy import inspect, select, text, update

from admin import audit
from admin.accounts import AccountError, AccountStore, token_digest
from admin.models import ApiToken, User
from catalog import db
from catalog.models import utcnow
from tests.conftest import FAST_HASHER

PASSWORD = "correct horse battery staple"


@pytest.fixture
def accounts(engine) -> AccountStore:
    return AccountStore(engine, hasher=FAST_HASHER)


def test_migration_0003_adds_and_removes_the_account_tables(engine):
    assert {"users", "api_tokens", "audit_log"} <= set(inspect(engine).get_table_names())
    db.downgrade(engine, "0002")
    assert not {"users", "api_tokens", "audit_log"} & set(inspect(engine).get_table_names())
    assert "ranker_fits" in inspect(engine).get_table_names()
    db.upgrade(engine)
    assert "users" in inspect(engine).get_table_names()


def test_passwords_are_stored_as_argon2id_hashes(accounts, engine):
    user = accounts.create_user("Alice", PASSWORD, "editor", actor="cli:test")
    assert (user.name, user.role, user.active) == ("alice", "editor", True)
    with engine.connect() as conn:
        stored = conn.scalar(text("SELECT password_hash FROM users WHERE name = 'alice'"))
    assert stored.startswith("$argon2id$") and PASSWORD not in stored


@pytest.mark.parametrize("name, password, role, message", [
    ("", PASSWORD, "editor", "user name"),
    ("bob smith", PASSWORD, "editor", "user name"),
    ("x" * 65, PASSWORD, "editor", "user name"),
    ("bob", "short", "editor", "password"),
    ("bob", PASSWORD, "admin", "role must be one of"),
])
def test_invalid_users_are_refused(accounts, name, password, role, message):
    with pytest.raises(AccountError, match=message):
        accounts.create_user(name, password, role, actor="cli:test")
    assert accounts.users() == []


def test_names_are_unique_regardless_of_case(accounts):
    accounts.create_user("alice", PASSWORD, "viewer", actor="cli:test")
    with pytest.raises(AccountError, match="already exists"):
        accounts.create_user("ALICE", PASSWORD, "editor", actor="cli:test")


def test_authenticate(accounts):
    accounts.create_user("alice", PASSWORD, "viewer", actor="cli:test")
    assert accounts.authenticate("Alice", PASSWORD).name == "alice"
    assert accounts.authenticate("alice", PASSWORD + "!") is None
    assert accounts.authenticate("nobody", PASSWORD) is None
    assert accounts.authenticate("bad name!", PASSWORD) is None
    accounts.set_active("alice", False, actor="cli:test")
    assert accounts.authenticate("alice", PASSWORD) is None


def test_login_rehashes_when_the_argon2_parameters_change(accounts, engine):
    accounts.create_user("alice", PASSWORD, "viewer", actor="cli:test")
    stronger = AccountStore(engine, hasher=PasswordHasher(time_cost=2, memory_cost=16, parallelism=1))
    assert stronger.authenticate("alice", PASSWORD) is not None
    with engine.connect() as conn:
        assert "m=16,t=2" in conn.scalar(text("SELECT password_hash FROM users"))


def test_role_change_disable_and_new_password_end_open_sessions(accounts):
    session_id = accounts.create_user("alice", PASSWORD, "viewer", actor="cli:test").get_id()
    assert accounts.session_user(session_id).role == "viewer"
    promoted = accounts.set_role("alice", "editor", actor="cli:test")
    assert accounts.session_user(session_id) is None
    assert accounts.session_user(promoted.get_id()).can_write
    renewed = accounts.set_password("alice", "another long password", actor="cli:test")
    assert accounts.session_user(promoted.get_id()) is None
    accounts.set_active("alice", False, actor="cli:test")
    assert accounts.session_user(renewed.get_id()) is None
    assert accounts.session_user("garbage") is None and accounts.session_user("1:x") is None


def test_api_tokens_are_stored_as_digests_and_can_be_revoked(accounts, engine):
    accounts.create_user("bot", PASSWORD, "viewer", actor="cli:test")
    info, token = accounts.create_token("bot", actor="cli:test", label="ci")
    assert token.startswith("tfa_") and len(token) > 40
    with engine.connect() as conn:
        row = conn.execute(select(ApiToken)).one()
    assert row.token_hash == token_digest(token) and token not in str(tuple(row))
    assert accounts.token_user(token).name == "bot"
    assert accounts.token_user(token + "x") is None and accounts.token_user("not-a-token") is None
    assert accounts.revoke_token(info.id, actor="cli:test").revoked_at is not None
    assert accounts.token_user(token) is None
    assert [t.usable() for t in accounts.tokens("bot")] == [False]
    with pytest.raises(AccountError, match="no token"):
        accounts.revoke_token(999, actor="cli:test")


def test_expired_tokens_and_disabled_users_tokens_are_refused(accounts, engine):
    accounts.create_user("bot", PASSWORD, "viewer", actor="cli:test")
    _, token = accounts.create_token("bot", actor="cli:test", days=1)
    _, forever = accounts.create_token("bot", actor="cli:test", days=None)
    with engine.begin() as conn:
        conn.execute(update(ApiToken).where(ApiToken.token_hash == token_digest(token))
                     .values(expires_at=utcnow() - timedelta(seconds=1)))
    assert accounts.token_user(token) is None
    assert accounts.token_user(forever).name == "bot"
    accounts.set_active("bot", False, actor="cli:test")
    assert accounts.token_user(forever) is None


def test_every_change_is_audited_without_secrets(accounts, engine):
    accounts.create_user("alice", PASSWORD, "viewer", actor="cli:ops")
    accounts.set_role("alice", "editor", actor="user:root")
    accounts.set_password("alice", "another long password", actor="cli:ops")
    accounts.set_active("alice", False, actor="cli:ops")
    info, token = accounts.create_token("alice", actor="cli:ops")
    accounts.revoke_token(info.id, actor="cli:ops")
    entries = audit.entries(engine)
    assert [e.action for e in reversed(entries)] == ["user.create", "user.set_role", "user.set_password",
                                                     "user.disable", "token.create", "token.revoke"]
    role_change = next(e for e in entries if e.action == "user.set_role")
    assert (role_change.actor, role_change.target) == ("user:root", "user:alice")
    assert role_change.before["role"] == "viewer" and role_change.after["role"] == "editor"
    assert role_change.at is not None
    with engine.connect() as conn:
        password_hash = conn.scalar(select(User.password_hash))
    everything = repr([(e.before, e.after) for e in entries])
    assert password_hash not in everything and token not in everything and PASSWORD not in everything
    assert [e.action for e in audit.entries(engine, target="user:alice", limit=1)] == ["user.disable"]


def test_a_failed_change_writes_no_audit_entry(accounts, engine):
    with pytest.raises(AccountError):
        accounts.set_role("ghost", "editor", actor="cli:ops")
    with pytest.raises(AccountError):
        accounts.create_token("ghost", actor="cli:ops")
    assert audit.entries(engine) == []
