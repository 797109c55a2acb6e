"""First steps on a fresh database (issue 44 item 8): docs/admin.md's order, `app.py users create`
before `make run`, printed `sqlite3.OperationalError: no such table: users` under a traceback.
Every app.py command on a database never set up either sets it up or says in one line what to
run, and none prints a traceback. Each command runs in a subprocess, as a person would run it."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run(data_dir: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "LLM_BASE_URL")}
    env.update(TASKFINDER_DATA_DIR=str(data_dir), SECRET_KEY="k" * 40, EMBEDDINGS_ENABLED="0")
    return subprocess.run([sys.executable, "app.py", *args], cwd=ROOT, env=env, input=stdin,
                          capture_output=True, text=True, timeout=120)


def test_users_create_first_sets_the_database_up_and_make_runs_demo_still_loads(tmp_path):
    created = run(tmp_path, "users", "create", "alice", "--role", "editor", "--password-stdin",
                  stdin="a long enough password\n")
    assert "Traceback" not in created.stdout + created.stderr
    assert created.returncode == 0, created.stderr
    assert "created alice (editor)" in created.stdout
    listed = run(tmp_path, "users", "list")
    assert listed.returncode == 0 and listed.stdout.startswith("alice\teditor\tactive"), listed.stderr
    # `make run` afterwards (load-demo) still finds an empty catalog and loads the demo
    loaded = run(tmp_path, "load-demo", "--no-fit")
    assert loaded.returncode == 0, loaded.stderr
    assert "catalog: " in loaded.stdout and "already loaded" not in loaded.stdout


@pytest.mark.parametrize("args", [
    ("users", "list"),
    ("tokens", "create", "alice"),
    ("tokens", "list"),
    ("search", "hearing screening"),
    ("export-cases", "cases.jsonl"),
    ("analytics", "report"),
], ids=lambda args: " ".join(args))
def test_commands_on_a_fresh_database_say_what_to_run(tmp_path, args):
    result = run(tmp_path, *args)
    output = result.stdout + result.stderr
    assert "Traceback" not in output
    assert result.returncode != 0
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert "make run" in lines[0] or "db upgrade" in lines[0], output


def test_the_fast_schema_check_agrees_with_alembic(tmp_path):
    """`app.py search` asks catalog.db.at_newest_migration (one query, no Alembic) before every
    run: the newest migration file's name must be Alembic's single head, and the fast yes must
    come exactly when schema_problem has nothing to say."""
    from alembic.script import ScriptDirectory

    from catalog import db

    scripts = ScriptDirectory.from_config(db.alembic_config("sqlite://"))
    assert scripts.get_heads() == [db.newest_migration()]
    engine = db.make_engine(f"sqlite:///{tmp_path / 'fast.db'}")
    assert not db.at_newest_migration(engine) and db.schema_problem(engine)
    db.upgrade(engine, "0014")
    assert not db.at_newest_migration(engine) and db.schema_problem(engine)
    db.upgrade(engine)
    assert db.at_newest_migration(engine) and db.schema_problem(engine) is None
    engine.dispose()


def test_each_lazy_command_is_the_command_its_name_says():
    """cli.LAZY_COMMANDS names each command it imports on first use: the name under which
    --help lists it is the command's own."""
    from cli import LAZY_COMMANDS, load_command

    for name in LAZY_COMMANDS:
        assert load_command(name).name == name


def test_app_py_search_imports_no_other_command_s_modules(tmp_path):
    """Issue 44 item 9: `app.py search` loads neither the evaluation package nor the kb/ corpora
    (cli.LAZY_COMMANDS): app.py importing every command module cost ~0.5 s of its ~3 s on the AMD
    EPYC VM; nor Flask, werkzeug or the admin (cli.search, run alone by app.main). Run as a person runs it (on a database never set up: it says what to run), with
    the modules it loaded written out at exit; `app.py evaluate --help` loads its own."""
    out = tmp_path / "modules.txt"
    probe = ("import atexit, runpy, sys; "
             f"atexit.register(lambda: open({str(out)!r}, 'w').write(chr(10).join(sorted(sys.modules)))); "
             "sys.argv = ['app.py'] + sys.argv[1:]; runpy.run_path('app.py', run_name='__main__')")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "LLM_BASE_URL")}
    env.update(TASKFINDER_DATA_DIR=str(tmp_path), SECRET_KEY="k" * 40, EMBEDDINGS_ENABLED="0")

    def modules(*args: str) -> set[str]:
        subprocess.run([sys.executable, "-c", probe, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=120)
        return set(out.read_text().split())

    heavy = {"cli.corpus", "cli.evaluate", "evaluation.evaluate", "kb.llm", "admin.routes",
             "cli.catalog", "cli.accounts", "catalog.formats", "jsonschema"}
    searched = modules("search", "hearing screening")
    assert not heavy & searched
    # nor the web side at all (cli.search runs without Flask; app.main)
    assert not {m.split(".")[0] for m in searched} & {"flask", "werkzeug", "admin", "api", "widget", "web", "argon2"}
    assert "serving.service" in searched   # it did search
    assert {"cli.evaluate", "evaluation.evaluate"} <= modules("evaluate", "--help")


def _venv_command(tmp_path: Path, *make_args: str) -> str:
    """The command `make` would create a new virtualenv with (a dry run: nothing is made)."""
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}  # under `make test`
    done = subprocess.run(["make", "-n", "--no-print-directory", f"VENV={venv}", *make_args, f"{venv}/bin/python"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.splitlines()[0]


def test_the_virtualenv_is_made_from_debians_optimised_python_where_it_has_venv_else_python3(tmp_path):
    """The Makefile makes the virtualenv from Debian's CPython 3.11 (built with PGO and LTO: the
    suite's CPU 12% less than pyenv's build, docs/architecture.md "The interpreter") when that
    interpreter is there with its venv module, else from python3; PYTHON=... overrides both."""
    venv = tmp_path / "venv"
    assert _venv_command(tmp_path, f"DEBIAN_PYTHON={sys.executable}") == f"{sys.executable} -m venv {venv}"
    assert _venv_command(tmp_path, "DEBIAN_PYTHON=/nonexistent/python3.11") == f"python3 -m venv {venv}"
    without_venv = tmp_path / "python-without-venv"      # `import ensurepip` fails: no python3.11-venv
    without_venv.write_text("#!/bin/sh\nexit 1\n")
    without_venv.chmod(0o755)
    assert _venv_command(tmp_path, f"DEBIAN_PYTHON={without_venv}") == f"python3 -m venv {venv}"
    assert _venv_command(tmp_path, f"DEBIAN_PYTHON={sys.executable}", "PYTHON=/opt/py/bin/python3") == \
        f"/opt/py/bin/python3 -m venv {venv}"
