"""`python app.py users ...` and `python app.py tokens ...`: accounts, API tokens, role tokens.

Passwords are read from a hidden prompt or, for scripts, the first line of stdin
(`--password-stdin`), never from an argument (which would land in shell history and `ps`).
Every change is audited with the operating-system account that ran it as the actor.
"""
from __future__ import annotations

import sys

import click
from flask import current_app
from flask.cli import AppGroup

from admin.accounts import DEFAULT_TOKEN_DAYS, ROLES, AccountError, AccountStore
from admin.audit import cli_actor
from api.roles import InvalidRoleToken, sign_role_token, valid_roles
from catalog import db

users_group = AppGroup("users", help="Admin accounts (roles: viewer reads, editor writes).")
tokens_group = AppGroup("tokens", help="API tokens for /admin/api, and role tokens for /api/search.")


def _accounts() -> AccountStore:
    return current_app.extensions["taskfinder"].accounts


def _read_password(from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    return click.prompt("Password", hide_input=True, confirmation_prompt=True)


def _run(action):
    """Run an account change; an AccountError is the operator's mistake, not a traceback."""
    try:
        return action()
    except AccountError as exc:
        raise click.ClickException(str(exc)) from exc


# -- users ---------------------------------------------------------------------------------
@users_group.command("create")
@click.argument("name")
@click.option("--role", type=click.Choice(ROLES), required=True)
@click.option("--password-stdin", is_flag=True, help="Read the password from the first line of stdin.")
def users_create(name: str, role: str, password_stdin: bool):
    """Create user NAME with a password (prompted, or --password-stdin)."""
    _set_up_a_blank_database()
    password = _read_password(password_stdin)
    user = _run(lambda: _accounts().create_user(name, password, role, cli_actor()))
    click.echo(f"created {user.name} ({user.role})")


def _set_up_a_blank_database() -> None:
    """The first account may come before `make run` (docs/admin.md): a database with no tables yet
    is migrated here, as `load-demo` would (which still loads the demo into the empty catalog
    afterwards); one set up but not migrated to head is left to `db upgrade`, and says so."""
    engine = _accounts().engine
    if db.is_blank(engine):
        db.upgrade(engine)
        click.echo(f"set up the database {engine.url.render_as_string(hide_password=True)} "
                   f"(empty catalog: `make run` or `python app.py load-demo` loads the demo)", err=True)
        return
    problem = db.schema_problem(engine)
    if problem:
        raise click.ClickException(problem)


@users_group.command("list")
def users_list():
    """List users: name, role, status."""
    for user in _accounts().users():
        click.echo(f"{user.name}\t{user.role}\t{'active' if user.active else 'disabled'}")


@users_group.command("set-role")
@click.argument("name")
@click.argument("role", type=click.Choice(ROLES))
def users_set_role(name: str, role: str):
    """Give user NAME the role ROLE (their open sessions end)."""
    user = _run(lambda: _accounts().set_role(name, role, cli_actor()))
    click.echo(f"{user.name} is now {user.role}")


@users_group.command("disable")
@click.argument("name")
def users_disable(name: str):
    """Disable user NAME: no sign-in, open sessions and API tokens stop working."""
    user = _run(lambda: _accounts().set_active(name, False, cli_actor()))
    click.echo(f"{user.name} disabled")


@users_group.command("enable")
@click.argument("name")
def users_enable(name: str):
    """Enable a disabled user NAME again."""
    user = _run(lambda: _accounts().set_active(name, True, cli_actor()))
    click.echo(f"{user.name} enabled")


@users_group.command("set-password")
@click.argument("name")
@click.option("--password-stdin", is_flag=True, help="Read the password from the first line of stdin.")
def users_set_password(name: str, password_stdin: bool):
    """Set user NAME's password (their open sessions end)."""
    password = _read_password(password_stdin)
    user = _run(lambda: _accounts().set_password(name, password, cli_actor()))
    click.echo(f"password of {user.name} changed")


# -- API tokens ----------------------------------------------------------------------------
@tokens_group.command("create")
@click.argument("name")
@click.option("--label", default="", help="What the token is for (shown by `tokens list`).")
@click.option("--days", default=DEFAULT_TOKEN_DAYS, show_default=True, type=click.IntRange(0, 3650),
              help="Days until it expires; 0: never.")
def tokens_create(name: str, label: str, days: int):
    """Create an API token acting as user NAME. It is printed once; only its hash is kept."""
    info, token = _run(lambda: _accounts().create_token(name, cli_actor(), label=label, days=days or None))
    expires = info.expires_at.date().isoformat() if info.expires_at else "never"
    click.echo(f"token {info.id} for {info.user} (expires {expires}); store it now, it is not shown again:",
               err=True)
    click.echo(token)


@tokens_group.command("list")
@click.option("--user", "name", default=None, help="Only this user's tokens.")
def tokens_list(name: str | None):
    """List API tokens (never the tokens themselves)."""
    for info in _run(lambda: _accounts().tokens(name)):
        status = "revoked" if info.revoked_at else ("active" if info.usable() else "expired")
        expires = info.expires_at.date().isoformat() if info.expires_at else "never"
        click.echo(f"{info.id}\t{info.user}\t{status}\texpires {expires}\t{info.label}")


@tokens_group.command("revoke")
@click.argument("token_id", type=int)
def tokens_revoke(token_id: int):
    """Revoke API token ID: it is refused from the next request on."""
    info = _run(lambda: _accounts().revoke_token(token_id, cli_actor()))
    click.echo(f"token {info.id} of {info.user} revoked")


# -- role tokens for /api/search (api.roles) ---------------------------------------------
@tokens_group.command("role-token")
@click.option("--roles", "roles", multiple=True, required=True,
              help="Role(s) to grant: repeat the option or separate with commas.")
@click.option("--ttl", default=300, show_default=True, type=click.IntRange(1), help="Seconds until it expires.")
@click.option("--subject", default=None,
              help="The person it names (the `sub` claim, the host's user id): learning counts distinct people.")
def tokens_role_token(roles: tuple[str, ...], ttl: int, subject: str | None):
    """Print a signed role token for /api/search (for hosts to test their integration)."""
    settings = current_app.config["SETTINGS"]
    if not settings.role_token_secret:
        raise click.ClickException("ROLE_TOKEN_SECRET is not set")
    if ttl > settings.role_token_max_ttl_s:
        raise click.ClickException(f"--ttl exceeds ROLE_TOKEN_MAX_TTL_S={settings.role_token_max_ttl_s}")
    try:
        granted = valid_roles(r.strip() for item in roles for r in item.split(",") if r.strip())
    except InvalidRoleToken as exc:
        raise click.BadParameter(str(exc), param_hint="--roles") from exc
    try:   # the roles are valid by now: what sign_role_token can still refuse is the subject
        token = sign_role_token(settings.role_token_secret, granted, ttl, audience=settings.role_token_audience,
                                subject=subject)
    except InvalidRoleToken as exc:
        raise click.BadParameter(str(exc), param_hint="--subject") from exc
    click.echo(token)


COMMANDS = (users_group, tokens_group)
