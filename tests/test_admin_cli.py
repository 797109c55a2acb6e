"""`python app.py users ...` and `tokens ...`: passwords never as arguments, tokens shown once,
every change audited with the operating-system account as the actor."""
import pytest

from admin import audit
from tests.conftest import FAST_HASHER, build_app, make_settings

PASSWORD = "correct horse battery staple"


@pytest.fixture
def app(tmp_path, shared_cache_dir):
    app = build_app(make_settings(tmp_path, shared_cache_dir), [], [])
    app.extensions["taskfinder"].accounts.hasher = FAST_HASHER
    return app


@pytest.fixture
def cli(app):
    runner = app.test_cli_runner()
    return lambda *args, stdin=None: runner.invoke(args=list(args), input=stdin)


def test_create_from_prompt_or_stdin_and_list(cli, app):
    prompted = cli("users", "create", "Alice", "--role", "editor", stdin=f"{PASSWORD}\n{PASSWORD}\n")
    assert prompted.exit_code == 0, prompted.output
    assert PASSWORD not in prompted.output and "created alice (editor)" in prompted.output
    piped = cli("users", "create", "bob", "--role", "viewer", "--password-stdin", stdin=f"{PASSWORD}\n")
    assert piped.exit_code == 0, piped.output
    assert cli("users", "list").output.splitlines() == ["alice\teditor\tactive", "bob\tviewer\tactive"]
    assert app.extensions["taskfinder"].accounts.authenticate("bob", PASSWORD) is not None


def test_a_password_is_never_taken_from_an_argument(cli):
    assert cli("users", "create", "carol", PASSWORD, "--role", "viewer").exit_code != 0
    assert cli("users", "create", "carol", "--role", "viewer", "--password", PASSWORD).exit_code != 0
    assert cli("users", "list").output == ""


def test_mistakes_are_messages_not_tracebacks(cli):
    short = cli("users", "create", "dave", "--role", "viewer", "--password-stdin", stdin="short\n")
    assert short.exit_code == 1 and "password is 12 to" in short.output
    assert "no user 'ghost'" in cli("users", "disable", "ghost").output
    assert cli("users", "create", "erin", "--role", "admin", "--password-stdin", stdin=f"{PASSWORD}\n").exit_code == 2
    assert "no token 42" in cli("tokens", "revoke", "42").output


def test_role_changes_and_disabling_are_audited_with_the_os_account(cli, app):
    cli("users", "create", "alice", "--role", "viewer", "--password-stdin", stdin=f"{PASSWORD}\n")
    assert cli("users", "set-role", "alice", "editor").output.strip() == "alice is now editor"
    assert cli("users", "disable", "alice").exit_code == 0
    assert cli("users", "list").output.strip() == "alice\teditor\tdisabled"
    assert cli("users", "enable", "alice").exit_code == 0
    changed = cli("users", "set-password", "alice", "--password-stdin", stdin="a brand new password\n")
    assert changed.exit_code == 0
    entries = audit.entries(app.extensions["taskfinder"].store.engine)
    assert [e.action for e in reversed(entries)] == ["user.create", "user.set_role", "user.disable", "user.enable",
                                                     "user.set_password"]
    assert all(e.actor.startswith("cli:") and e.target == "user:alice" for e in entries)


def test_a_token_is_printed_once_and_revoked_by_id(cli, app):
    cli("users", "create", "robot", "--role", "viewer", "--password-stdin", stdin=f"{PASSWORD}\n")
    created = cli("tokens", "create", "robot", "--label", "nightly export")
    assert created.exit_code == 0, created.output
    token = created.stdout.strip()
    assert token.startswith("tfa_") and "\n" not in token
    accounts = app.extensions["taskfinder"].accounts
    assert accounts.token_user(token).name == "robot"
    listed = cli("tokens", "list").output
    assert "1\trobot\tactive" in listed and "nightly export" in listed and token not in listed
    assert cli("tokens", "revoke", "1").output.strip() == "token 1 of robot revoked"
    assert accounts.token_user(token) is None
    assert "1\trobot\trevoked" in cli("tokens", "list", "--user", "robot").output
    assert cli("tokens", "create", "nobody").exit_code == 1
