"""Admin accounts, their roles, and API tokens: the only code that reads or writes them.

Roles: `viewer` reads, `editor` also writes. Passwords are hashed with argon2id (argon2-cffi's
defaults, RFC 9106's second recommended profile) and re-hashed on login when those defaults
change. API tokens are `tfa_` + 256 random bits, shown once; only their SHA-256 digest is kept.
Every change is written with its audit entry in one transaction (admin.audit).
"""
from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from admin import audit
from admin.models import ApiToken, User
from catalog.models import utcnow

VIEWER, EDITOR = "viewer", "editor"
ROLES = (VIEWER, EDITOR)
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._@-]{0,63}$")
MIN_PASSWORD_CHARS = 12
MAX_PASSWORD_CHARS = 1024          # argon2 hashes anything, but no need to accept megabytes
TOKEN_PREFIX = "tfa_"              # recognisable by secret scanners, and distinct from role tokens
DEFAULT_TOKEN_DAYS = 90


class AccountError(ValueError):
    """A request about accounts that cannot be done (the message says why, to an operator)."""


@dataclass(frozen=True)
class Account:
    """A user as the rest of the code sees it (no password hash). It also satisfies
    Flask-Login's user protocol; `get_id` carries the auth epoch so that a session opened
    before a role change, a disable or a new password stops working at once."""

    id: int
    name: str
    role: str
    active: bool
    auth_epoch: int

    @property
    def can_write(self) -> bool:
        return self.active and self.role == EDITOR

    # Flask-Login's user protocol
    is_authenticated = True
    is_anonymous = False

    @property
    def is_active(self) -> bool:
        return self.active

    def get_id(self) -> str:
        return f"{self.id}:{self.auth_epoch}"


@dataclass(frozen=True)
class TokenInfo:
    id: int
    user: str
    label: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None

    def usable(self, now: datetime | None = None) -> bool:
        now = now or utcnow()
        return self.revoked_at is None and (self.expires_at is None or _aware(self.expires_at) > now)


def _aware(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes; everything we write is UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def _account(row: User) -> Account:
    return Account(id=row.id, name=row.name, role=row.role, active=row.active, auth_epoch=row.auth_epoch)


def _snapshot(row: User) -> dict:
    """A user's state for the audit log (never the password hash)."""
    return {"name": row.name, "role": row.role, "active": row.active}


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def normalise_name(name: str) -> str:
    """Names are case-insensitive: stored and looked up in lower case."""
    name = (name or "").strip().lower()
    if not NAME_PATTERN.match(name):
        raise AccountError("a user name is 1-64 characters: letters, digits, '.', '_', '@', '-'")
    return name


def check_role(role: str) -> str:
    if role not in ROLES:
        raise AccountError(f"role must be one of: {', '.join(ROLES)}")
    return role


def check_password(password: str) -> str:
    if not MIN_PASSWORD_CHARS <= len(password) <= MAX_PASSWORD_CHARS:
        raise AccountError(f"a password is {MIN_PASSWORD_CHARS} to {MAX_PASSWORD_CHARS} characters")
    return password


class AccountStore:
    def __init__(self, engine: Engine, hasher: PasswordHasher | None = None):
        self.engine = engine
        self.hasher = hasher or PasswordHasher()
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self._dummy_hash: str | None = None

    # -- users ---------------------------------------------------------------------------
    def create_user(self, name: str, password: str, role: str, actor: str) -> Account:
        name, role = normalise_name(name), check_role(role)
        password_hash = self.hasher.hash(check_password(password))
        try:
            with self._sessions.begin() as session:
                if session.scalar(select(User.id).where(User.name == name)) is not None:
                    raise AccountError(f"user {name!r} already exists")
                row = User(name=name, password_hash=password_hash, role=role, active=True, auth_epoch=1)
                session.add(row)
                audit.record(session, actor, "user.create", f"user:{name}", None, _snapshot(row))
        except IntegrityError as exc:  # created concurrently
            raise AccountError(f"user {name!r} already exists") from exc
        return _account(row)

    def users(self) -> list[Account]:
        with self._sessions() as session:
            return [_account(row) for row in session.scalars(select(User).order_by(User.name))]

    def user(self, name: str) -> Account:
        with self._sessions() as session:
            return _account(self._row(session, name))

    def set_role(self, name: str, role: str, actor: str) -> Account:
        role = check_role(role)
        return self._change(name, actor, "user.set_role", lambda row: setattr(row, "role", role))

    def set_active(self, name: str, active: bool, actor: str) -> Account:
        return self._change(name, actor, "user.enable" if active else "user.disable",
                            lambda row: setattr(row, "active", active))

    def set_password(self, name: str, password: str, actor: str) -> Account:
        password_hash = self.hasher.hash(check_password(password))
        return self._change(name, actor, "user.set_password", lambda row: setattr(row, "password_hash", password_hash))

    def end_sessions(self, name: str, actor: str) -> Account:
        """Sign a user out everywhere (logout): a new auth epoch, so every session cookie issued
        before, a copied one included, is refused from now on (session_user)."""
        return self._change(name, actor, "user.sign_out", lambda row: None)

    def _row(self, session: Session, name: str) -> User:
        row = session.scalar(select(User).where(User.name == normalise_name(name)))
        if row is None:
            raise AccountError(f"no user {name!r}")
        return row

    def _change(self, name: str, actor: str, action: str, apply) -> Account:
        """Apply one change to a user, end their sessions (new auth epoch), audit it."""
        with self._sessions.begin() as session:
            row = self._row(session, name)
            before = _snapshot(row)
            apply(row)
            row.auth_epoch += 1
            after = _snapshot(row)
            if action == "user.set_password":
                after = {**after, "password": "changed"}
            audit.record(session, actor, action, f"user:{row.name}", before, after)
        return _account(row)

    # -- authentication ------------------------------------------------------------------
    def authenticate(self, name: str, password: str) -> Account | None:
        """The active user with this name and password, else None. An unknown name costs the
        same argon2 work as a wrong password, so timing does not tell which names exist."""
        try:
            name = normalise_name(name)
        except AccountError:
            name = ""
        password = password[:MAX_PASSWORD_CHARS]
        with self._sessions() as session:
            row = session.scalar(select(User).where(User.name == name)) if name else None
        if row is None:
            self._verify(self._dummy(), password)
            return None
        if not self._verify(row.password_hash, password) or not row.active:
            return None
        if self.hasher.check_needs_rehash(row.password_hash):
            self._rehash(row.id, password)
        return _account(row)

    def session_user(self, session_id: str) -> Account | None:
        """The user behind a session's `get_id()` value, if still active at the same epoch."""
        user_id, _, epoch = (session_id or "").partition(":")
        if not (user_id.isdigit() and epoch.isdigit()):
            return None
        with self._sessions() as session:
            row = session.get(User, int(user_id))
            if row is None or not row.active or row.auth_epoch != int(epoch):
                return None
            return _account(row)

    def _verify(self, password_hash: str, password: str) -> bool:
        try:
            return self.hasher.verify(password_hash, password)
        except (VerificationError, InvalidHashError):
            return False

    def _dummy(self) -> str:
        if self._dummy_hash is None:
            self._dummy_hash = self.hasher.hash(secrets.token_urlsafe(16))
        return self._dummy_hash

    def _rehash(self, user_id: int, password: str) -> None:
        with self._sessions.begin() as session:
            row = session.get(User, user_id)
            if row is not None:
                row.password_hash = self.hasher.hash(password)

    # -- API tokens ----------------------------------------------------------------------
    def create_token(self, name: str, actor: str, label: str = "",
                     days: int | None = DEFAULT_TOKEN_DAYS) -> tuple[TokenInfo, str]:
        """A new token for user `name`: (its info, the token itself, which is not kept)."""
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        expires_at = utcnow() + timedelta(days=days) if days else None
        with self._sessions.begin() as session:
            user = self._row(session, name)
            row = ApiToken(user_id=user.id, label=label[:100], token_hash=token_digest(token),
                           expires_at=expires_at)
            session.add(row)
            session.flush()
            audit.record(session, actor, "token.create", f"token:{row.id}", None,
                         {"user": user.name, "label": row.label,
                          "expires_at": expires_at.isoformat() if expires_at else None})
            info = TokenInfo(row.id, user.name, row.label, row.created_at, expires_at, None)
        return info, token

    def tokens(self, name: str | None = None) -> list[TokenInfo]:
        query = select(ApiToken, User.name).join(User, User.id == ApiToken.user_id).order_by(ApiToken.id)
        if name is not None:
            query = query.where(User.name == normalise_name(name))
        with self._sessions() as session:
            return [TokenInfo(t.id, user, t.label, t.created_at, t.expires_at, t.revoked_at)
                    for t, user in session.execute(query)]

    def revoke_token(self, token_id: int, actor: str) -> TokenInfo:
        with self._sessions.begin() as session:
            row = session.get(ApiToken, token_id)
            if row is None:
                raise AccountError(f"no token {token_id}")
            before = {"revoked_at": row.revoked_at.isoformat() if row.revoked_at else None}
            if row.revoked_at is None:
                row.revoked_at = utcnow()
            audit.record(session, actor, "token.revoke", f"token:{row.id}", before,
                         {"revoked_at": row.revoked_at.isoformat()})
            user = session.get(User, row.user_id)
            return TokenInfo(row.id, user.name, row.label, row.created_at, row.expires_at, row.revoked_at)

    def token_user(self, token: str) -> Account | None:
        """The active user a presented token acts as; None if unknown, revoked or expired."""
        if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
            return None
        with self._sessions() as session:
            found = session.execute(select(ApiToken, User).join(User, User.id == ApiToken.user_id)
                                    .where(ApiToken.token_hash == token_digest(token))).first()
        if found is None:
            return None
        row, user = found
        info = TokenInfo(row.id, user.name, row.label, row.created_at, row.expires_at, row.revoked_at)
        return _account(user) if info.usable() and user.active else None
