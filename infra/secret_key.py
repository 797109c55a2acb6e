"""The server's secret when SECRET_KEY is not set: one key, generated once, kept in the data
directory, shared by every process that uses that directory. It signs admin sessions
(admin.blueprint) and keys the analytics pseudonyms of networks and people (analytics).

Why (issue 17 item 2): a random key per process split gunicorn's workers: a session signed by
one worker was refused by the next (3 of 8 logins failed CSRF, 2-7 of 10 admin requests got
401). Every worker now reads the same file; the gunicorn master creates it before it forks
(ops/gunicorn.conf.py), and a race between processes creating it at once is settled by an
atomic link (the loser reads the winner's key). Several hosts do not share a data directory:
there, set SECRET_KEY (the same on every host).

The file is `<TASKFINDER_DATA_DIR>/secret_key`, mode 0600; a file that others can read is
refused (like ssh refuses a private key that is group- or world-readable).
"""
from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

KEY_FILE = "secret_key"
KEY_BYTES = 48


class SecretKeyError(RuntimeError):
    """The key file exists but cannot be trusted or read."""


def key_path(data_dir: Path) -> Path:
    return Path(data_dir) / KEY_FILE


def shared_secret_key(data_dir: Path) -> str:
    """The key in `data_dir`'s key file, created (mode 0600) if there is none yet."""
    path = key_path(data_dir)
    if not path.exists():
        _create(path)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise SecretKeyError(f"{path} is readable by other users (mode {mode:o}); run: chmod 600 {path}")
    key = path.read_text(encoding="ascii").strip()
    if len(key) < 32:
        raise SecretKeyError(f"{path} holds no usable key (fewer than 32 characters); delete it to make a new one")
    return key


def _create(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="ascii") as out:
            out.write(secrets.token_urlsafe(KEY_BYTES) + "\n")
        try:
            os.link(temporary, path)      # atomic: exactly one process's key becomes the file
        except FileExistsError:
            pass                          # another process won; its key is the one
    finally:
        temporary.unlink(missing_ok=True)
