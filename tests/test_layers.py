"""One direction of flow: no product module imports a module of a higher layer (issue 18, item 3).

The layers, lowest first (a module may import its own layer and any layer below it):

    foundation    settings, the text pipeline (lexicon.text), generic infrastructure with no product
                  knowledge (infra: circuit breaker, disk cache, chat client, local llama.cpp;
                  and the Flask-free web.metrics: the Prometheus registry)
    catalog       records, storage, formats, splits, versions
    ranking core  search/: text -> signals -> fit -> ranked shortlist (and lexicon.rationale, the
                  lexicon built from the catalog's cases); imports no Flask
    engines       rerank/ (constrained LLM re-ranking), kb/ (document corpora) without their HTTP parts
    services      the search service that runs core + re-rank (serving.service and what it holds),
                  analytics core, evaluation
    web           HTTP blueprints (admin/ with the analytics pages, widget/, and api/: the public
                  search, events and kb APIs), the cross-cutting web plumbing, every `cli` module,
                  and Flask itself
    app           app.py: create_app(settings) and the CLI entry point
    tools         ops/, tests/, migrations/

The test reads every module's imports with `ast` (function-level and TYPE_CHECKING imports too;
importing `pkg.mod` from outside `pkg` also runs `pkg/__init__.py`, so that counts as imported).
It is written against the TARGET layout: MOVING names the modules that live in the wrong room
today (each with where it goes), and KNOWN_UPWARD the imports that still run up a layer. Delete
an entry when its file moves or its import goes: the test fails on a stale entry, on any new
upward import, and on a module of a package that has no layer yet (give it one in HOMES).
"""
from __future__ import annotations

import ast
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LAYERS = ("foundation", "catalog", "ranking core", "engines", "services", "web", "app", "tools")

# dotted module prefix -> layer; the longest matching prefix decides.
HOMES = {
    "settings": "foundation", "lexicon": "foundation", "infra": "foundation",
    # the Flask-free parts of the web package that the services below it use: the Prometheus
    # registry (serving.service records into it) and its multiprocess collector
    "web.metrics": "foundation", "web.multiprocess": "foundation",
    "catalog": "catalog",
    "search": "ranking core", "lexicon.rationale": "ranking core",
    "rerank": "engines", "kb": "engines",
    "analytics": "services", "evaluation": "services", "serving": "services",
    # the HTTP surface and the web plumbing (limits, headers, metrics middleware, JSON provider, clients)
    "admin": "web", "widget": "web", "api": "web", "web": "web",
    "app": "app",
    "ops": "tools", "tests": "tools", "migrations": "tools",
}
#: Third-party web frameworks sit at the web layer: a lower module importing one is an upward import.
WEB_LIBRARIES = frozenset({"flask", "werkzeug", "flask_login", "flask_wtf", "flask_limiter", "waitress", "gunicorn"})

# Today's known violations. Delete an entry when its file moves (or its import goes); never add one
# to let a new upward import through.
# Modules that live in a lower room than their job: module -> (layer it is checked at, where it goes).
MOVING: dict[str, tuple[str, str]] = {}
# Imports that run up the layers today: (importer, imported) -> the file to change and how.
KNOWN_UPWARD: dict[tuple[str, str], str] = {}
SKIPPED_DIRS = {"__pycache__", "node_modules", "instance", "out", "build", "dist"}


@lru_cache(maxsize=None)
def modules() -> dict[str, Path]:
    """Every Python module of the repository: dotted name -> file."""
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT).parts
        if any(part.startswith(".") or part in SKIPPED_DIRS for part in parts[:-1]):
            continue
        dotted = list(parts[:-1]) + ([] if parts[-1] == "__init__.py" else [parts[-1][:-3]])
        if dotted and all(part.isidentifier() for part in dotted):
            found[".".join(dotted)] = path
    return found


@lru_cache(maxsize=None)
def _imports_nothing(module: str) -> bool:
    """A package whose __init__.py imports nothing (only a docstring): running it costs nothing,
    so importing one of its modules from below does not pull the package's layer in."""
    path = modules().get(module)
    return bool(path and path.name == "__init__.py" and not any(
        isinstance(node, (ast.Import, ast.ImportFrom)) for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))))


def layer(module: str) -> str | None:
    if module.split(".")[0] in WEB_LIBRARIES:
        return "web"
    if _imports_nothing(module):
        return "foundation"
    if module in MOVING:
        return MOVING[module][0]
    if module.split(".")[-1] == "cli":
        return "web"  # CLI commands live next to the code they drive and may use Flask's CLI
    prefixes = [p for p in HOMES if module == p or module.startswith(p + ".")]
    return HOMES[max(prefixes, key=len)] if prefixes else None


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest prefix of `name` that is a module of ours, or a web library's top-level name."""
    if name.split(".")[0] in WEB_LIBRARIES:
        return name.split(".")[0]
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in known or (ROOT / Path(*parts[:end])).is_dir():
            return candidate
    return None


def imports_of(module: str, path: Path, known: dict[str, Path]) -> dict[str, str]:
    """What `module` imports of ours (and of the web libraries), `pkg/__init__` included:
    imported module -> the import statement's module that brought it in."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)] if package else []
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:  # `from pkg import mod` imports pkg.mod when that is a module
                names.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    found: dict[str, str] = {}
    for name in names:
        target = _resolve(name, known) if name else None
        if target is None or target == module:
            continue
        found[target] = target
        parts = target.split(".")
        if parts[0] != module.split(".")[0]:  # from outside the package, its __init__ runs too
            for end in range(1, len(parts)):
                if ".".join(parts[:end]) in known:
                    found.setdefault(".".join(parts[:end]), target)
    return found


@lru_cache(maxsize=None)
def import_graph() -> dict[str, dict[str, str]]:
    known = modules()
    return {module: imports_of(module, path, known) for module, path in known.items()}


def upward_imports() -> dict[tuple[str, str], str]:
    """(importer, imported) -> the imported module named in the import statement."""
    found = {}
    for module, targets in import_graph().items():
        for target, via in targets.items():
            here, there = layer(module), layer(target)
            if here and there and LAYERS.index(there) > LAYERS.index(here):
                found[(module, target)] = via
    return found


def test_every_module_has_a_layer():
    unplaced = sorted(m for m in modules() if layer(m) is None)
    assert not unplaced, f"give these modules' package a layer in HOMES (tests/test_layers.py): {unplaced}"


def test_no_import_runs_up_a_layer():
    upward = upward_imports()
    new = sorted(pair for pair, via in upward.items() if pair not in KNOWN_UPWARD and (pair[0], via) not in KNOWN_UPWARD)
    assert not new, "imports that run up the layers (" + " < ".join(LAYERS) + "):\n" + "\n".join(
        f"  {m} ({layer(m)}) imports {t} ({layer(t)})" + (f" through {upward[m, t]}" if upward[m, t] != t else "")
        for m, t in new)


def test_known_violations_are_still_current():
    """So the lists only shrink: an entry whose file moved or whose import went must be deleted."""
    graph = import_graph()
    moved = sorted(m for m in MOVING if m not in graph)
    assert not moved, f"these modules moved: delete their MOVING entries: {moved}"
    fixed = sorted(pair for pair in KNOWN_UPWARD if pair[1] not in graph.get(pair[0], ()))
    assert not fixed, f"these imports are gone: delete their KNOWN_UPWARD entries: {fixed}"
    assert all(target in LAYERS for target, _ in MOVING.values())


def test_the_ranking_core_and_everything_below_it_load_no_flask():
    """The real import, not only the parsed one: nothing below the services layer loads a web
    framework (the ranking core, the catalog, the engines, the foundation)."""
    lower = sorted(m for m in modules() if LAYERS.index(layer(m) or "tools") <= LAYERS.index("engines"))
    assert any(m.startswith("search.") for m in lower) and "settings" in lower
    probe = ("import importlib, sys\n"
             f"for name in {lower!r}: importlib.import_module(name)\n"
             f"print(sorted({{n.split('.')[0] for n in sys.modules}} & {set(WEB_LIBRARIES)!r}))")
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", f"a module below the services layer loads: {result.stdout.strip()}"


def test_the_public_search_api_loads_no_admin():
    """Issue 35 item 3: importing the public search blueprint loaded the whole admin (api.search ->
    analytics -> analytics.pages -> admin -> admin.learned -> analytics.learning, while analytics was
    half initialised). The public HTTP surface (api/) and the admin (admin/) are separate homes."""
    probe = ("import sys\n"
             "import api.search, api.events, api.kb\n"
             "print(sorted(m for m in sys.modules if m == 'admin' or m.startswith('admin.')))")
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", f"importing the public API loads the admin: {result.stdout.strip()}"


def test_an_injected_upward_import_is_caught(tmp_path):
    """The lists are empty, and the check still bites: a ranking-core module importing the
    service (services) or an admin view (web) is reported, one importing the catalog is not."""
    known = modules()
    source = tmp_path / "injected.py"
    source.write_text("from catalog.records import TaskRecord\nfrom serving.service import SearchService\n"
                      "def later():\n    from admin.editor import render_preview\n", encoding="utf-8")
    found = imports_of("search.injected", source, known)
    upward = sorted(t for t in found if LAYERS.index(layer(t)) > LAYERS.index(layer("search.injected")))
    assert "serving.service" in upward and "admin.editor" in upward
    assert "catalog.records" not in upward
    assert not MOVING and not KNOWN_UPWARD
