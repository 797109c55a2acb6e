"""Shared fixtures: settings in a temp dir, engines on SQLite and PostgreSQL, an app with the
demo data loaded, and the demo records.

PostgreSQL runs on every machine of ours (127.0.0.1:5432, trust auth, database `test`);
each test gets its own schema there, dropped afterwards. Set TEST_POSTGRES_URL to point
elsewhere.
"""
from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from catalog import db
from catalog.cli import DEMO_CASES, DEMO_CATALOG
from catalog.formats import load_cases_file, load_tasks_file
from catalog.store import CatalogStore
from settings import Settings

POSTGRES_URL = os.environ.get("TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


@pytest.fixture(scope="session")
def shared_cache_dir(tmp_path_factory) -> Path:
    """One embedding/LLM cache for the whole run: the 200 demo tasks are embedded once."""
    return tmp_path_factory.mktemp("cache")


def make_settings(data_dir: Path, cache_dir: Path, **env) -> Settings:
    base = {"TASKFINDER_DATA_DIR": str(data_dir), "CACHE_DIR": str(cache_dir)}
    return Settings.from_env({**base, **{k: str(v) for k, v in env.items()}})


@pytest.fixture
def settings(tmp_path, shared_cache_dir) -> Settings:
    return make_settings(tmp_path, shared_cache_dir)


@pytest.fixture(scope="session")
def demo_tasks():
    return load_tasks_file(DEMO_CATALOG)


@pytest.fixture(scope="session")
def demo_cases(demo_tasks):
    return load_cases_file(DEMO_CASES, {t.id for t in demo_tasks})


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request, tmp_path):
    """A migrated, empty database of each kind."""
    if request.param == "sqlite":
        engine = db.make_engine(f"sqlite:///{tmp_path / 'store.db'}")
        db.upgrade(engine)
        yield engine
        engine.dispose()
        return
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    engine = create_engine(POSTGRES_URL, connect_args={"options": f"-csearch_path={schema}"})
    try:
        db.upgrade(engine)
        yield engine
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture
def store(engine) -> CatalogStore:
    return CatalogStore(engine)


def build_app(settings: Settings, tasks, cases):
    from app import create_app

    app = create_app(settings)
    services = app.extensions["taskfinder"]
    db.upgrade(services.store.engine)
    services.store.import_tasks(list(tasks))
    services.store.import_cases(list(cases))
    return app


@pytest.fixture(scope="session")
def demo_app(tmp_path_factory, shared_cache_dir, demo_tasks, demo_cases):
    """A read-only app over the demo data (embedded SQLite, local embeddings, no LLM)."""
    return build_app(make_settings(tmp_path_factory.mktemp("demo"), shared_cache_dir), demo_tasks, demo_cases)


@pytest.fixture
def client(demo_app):
    return demo_app.test_client()
