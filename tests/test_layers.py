"""One direction of flow and no loops: no product module imports a module of a higher layer
(issue 18, item 3), and no product modules import each other round in a circle (issue 45).

The layers, lowest first (a module may import its own layer and any layer below it):

    foundation    settings, the text pipeline and the rationale lexicon (lexicon/), generic
                  infrastructure with no product knowledge (infra: circuit breaker, disk cache,
                  chat client, local llama.cpp, the Prometheus registry infra.metrics and its
                  multiprocess collector)
    catalog       records, storage, formats, splits, versions
    ranking core  search/: text -> signals -> fit -> ranked shortlist; imports no Flask
    engines       rerank/ (constrained LLM re-ranking), kb/ (document corpora) without their HTTP parts
    services      the search service that runs core + re-rank (serving.service and what it holds),
                  analytics core, evaluation
    web           HTTP blueprints (admin/ with the analytics pages, widget/, and api/: the public
                  search, events and kb APIs), the cross-cutting web plumbing, and Flask itself
    app           app.py: create_app(settings) and the CLI entry point; cli/: the commands it registers
    tools         ops/, tests/, migrations/

A module's layer is its package's (HOMES, the longest matching prefix), with no exemption by
name; the one other rule is that a package whose __init__.py imports nothing costs nothing to
run, so it counts as the foundation.

The test reads every module's imports with `ast`: function-level and TYPE_CHECKING imports too;
importing `pkg.mod` also runs `pkg/__init__.py` (unless the importer is inside `pkg`, which has
run it already), so that counts as imported; and a module named by a string at run time
(`sys.modules["pkg.mod"]`, `importlib.import_module("pkg.mod")`, `__import__("pkg.mod")`) is
imported too, since it is a dependency all the same. A product module may not look a module up
by a name the test cannot read (a variable). It is written against the TARGET layout: MOVING
names the modules that live in the wrong room today (each with where it goes), and KNOWN_UPWARD
the imports that still run up a layer. Delete an entry when its file moves or its import goes:
the test fails on a stale entry, on any new upward import, and on a module of a package that has
no layer yet (give it one in HOMES). The product modules (every layer but the tools) must form
no import cycle: Tarjan's strongly connected components of the graph, each of more than one
module a loop to break.
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
    "catalog": "catalog",
    "search": "ranking core",
    "rerank": "engines", "kb": "engines",
    "analytics": "services", "evaluation": "services", "serving": "services",
    # the HTTP surface and the web plumbing (limits, headers, metrics middleware, JSON provider, clients)
    "admin": "web", "widget": "web", "api": "web", "web": "web",
    "app": "app", "cli": "app",
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


def _is_sys_modules(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "modules" and \
        isinstance(node.value, ast.Name) and node.value.id == "sys"


def runtime_lookups(tree: ast.AST) -> tuple[set[str], list[int]]:
    """The module names a module reaches at run time instead of by an import statement:
    `sys.modules["a.b"]` (and its .get/.pop/.setdefault), `importlib.import_module("a.b")`,
    `__import__("a.b")`; and the lines of those whose name is not a string literal (the test
    cannot tell what they reach)."""
    named: set[str] = set()
    unreadable: list[int] = []

    def take(argument: ast.AST | None, line: int) -> None:
        if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
            named.add(argument.value)
        else:
            unreadable.append(line)

    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _is_sys_modules(node.value):
            take(node.slice, node.lineno)
        elif isinstance(node, ast.Call):
            func = node.func
            first = node.args[0] if node.args else None
            if isinstance(func, ast.Attribute) and _is_sys_modules(func.value) and \
                    func.attr in ("get", "pop", "setdefault", "__getitem__"):
                take(first, node.lineno)
            elif (isinstance(func, ast.Attribute) and func.attr == "import_module") or \
                    (isinstance(func, ast.Name) and func.id in ("import_module", "__import__")):
                take(first, node.lineno)
    return named, unreadable


def imports_of(module: str, path: Path, known: dict[str, Path]) -> dict[str, str]:
    """What `module` imports of ours (and of the web libraries), `pkg/__init__` and run-time
    look-ups included: imported module -> the import statement's module that brought it in."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    names, _ = runtime_lookups(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)] if package else []
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:  # `from pkg import mod` imports pkg.mod when that is a module
                names.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    # the packages `module` is inside have run their __init__ before it: importing a sibling
    # does not run them again
    inside = {".".join(module.split(".")[:end]) for end in range(1, module.count(".") + 2)}
    found: dict[str, str] = {}
    for name in names:
        target = _resolve(name, known) if name else None
        if target is None or target == module:
            continue
        found[target] = target
        parts = target.split(".")
        for end in range(1, len(parts)):   # every package above the target runs its __init__ too
            parent = ".".join(parts[:end])
            if parent in known and parent not in inside:
                found.setdefault(parent, target)
    return found


@lru_cache(maxsize=None)
def import_graph() -> dict[str, dict[str, str]]:
    known = modules()
    return {module: imports_of(module, path, known) for module, path in known.items()}


def is_product(module: str) -> bool:
    """A module of the product: ours (not a web library), in any layer but the tools (ops/,
    tests/, migrations/)."""
    return module.split(".")[0] not in WEB_LIBRARIES and layer(module) not in (None, "tools")


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of `graph` (node -> the nodes it has an edge to),
    iteratively (no recursion limit): each component of more than one node is a cycle, and
    every cycle lies inside one. Components and their nodes sorted, for a stable message."""
    index: dict[str, int] = {}
    lowlink: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = lowlink[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            following = next(edges, None)
            if following is not None:
                if following not in index:
                    index[following] = lowlink[following] = len(index)
                    stack.append(following)
                    on_stack.add(following)
                    work.append((following, iter(sorted(graph.get(following, ())))))
                elif following in on_stack:
                    lowlink[node] = min(lowlink[node], index[following])
                continue
            work.pop()
            if work:
                lowlink[work[-1][0]] = min(lowlink[work[-1][0]], lowlink[node])
            if lowlink[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return sorted(components)


def product_graph(graph: dict[str, dict[str, str]]) -> dict[str, set[str]]:
    """`graph` (import_graph's form) restricted to product modules: module -> the product
    modules it imports."""
    return {module: {t for t in targets if is_product(t)} for module, targets in graph.items() if is_product(module)}


def import_cycles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """The import loops among product modules: the strongly connected components of more than
    one module."""
    return [c for c in strongly_connected(product_graph(graph)) if len(c) > 1]


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


def test_no_product_modules_import_each_other_in_a_loop():
    """Issue 45: a loop makes the import order matter (a name half defined when the loop comes
    back to its module) and ties the modules in it into one piece that cannot be understood,
    tested or moved apart. Function-level imports and run-time look-ups count: they hide a loop,
    they do not remove it."""
    graph = import_graph()
    loops = import_cycles(graph)
    assert not loops, "import loops among product modules (each a strongly connected component):\n" + "\n".join(
        f"  {len(loop)} modules: " + ", ".join(loop) + "\n    e.g. " + "; ".join(
            f"{m} -> {t}" for m in loop for t in sorted(graph[m]) if t in loop)
        for loop in loops)


def test_no_product_module_looks_a_module_up_by_a_name_it_computes():
    """A `sys.modules[name]` or `import_module(name)` with a name the test cannot read is an
    import it cannot place in the graph: product code names its modules literally (or imports them)."""
    unreadable = sorted(f"{module} line {line}" for module, path in modules().items() if is_product(module)
                        for line in runtime_lookups(ast.parse(path.read_text(encoding="utf-8")))[1])
    assert not unreadable, f"run-time module look-ups by a computed name: {unreadable}"


def test_an_injected_cycle_and_runtime_lookup_are_caught(tmp_path):
    """The loop check bites: a ranking-core module that the prefilter imports, and that reaches
    the prefilter back through `sys.modules` (today's search.signal.base did) or importlib, closes
    a loop; a module that only imports the prefilter closes none."""
    known = modules()
    looking_up = tmp_path / "looking_up.py"
    looking_up.write_text("import sys\n\ndef plan():\n    return sys.modules['search.prefilter'].plan_query\n",
                          encoding="utf-8")
    assert "search.prefilter" in imports_of("search.injected", looking_up, known)
    importing = tmp_path / "importing.py"
    importing.write_text("import importlib\nprefilter = importlib.import_module('search.prefilter')\n", encoding="utf-8")
    assert "search.prefilter" in imports_of("search.injected", importing, known)
    assert runtime_lookups(ast.parse("import sys\nsys.modules[__name__]\n"))[1] == [2]

    graph = {module: dict(targets) for module, targets in import_graph().items()}
    graph["search.injected"] = imports_of("search.injected", looking_up, known)
    graph["search.prefilter"] = {**graph["search.prefilter"], "search.injected": "search.injected"}
    known_loops = {tuple(loop) for loop in import_cycles(import_graph())}
    new = [loop for loop in import_cycles(graph) if "search.injected" in loop]
    assert new and "search.prefilter" in new[0] and tuple(new[0]) not in known_loops

    leaf = {module: dict(targets) for module, targets in import_graph().items()}
    leaf["search.injected"] = {"search.prefilter": "search.prefilter"}
    assert not any("search.injected" in loop for loop in import_cycles(leaf))


def test_tarjan_finds_every_loop_and_only_loops():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}, "f": {"a"}, "g": set()}
    assert [c for c in strongly_connected(graph) if len(c) > 1] == [["a", "b", "c"], ["d", "e"]]
    assert sorted(map(tuple, strongly_connected(graph))) == [("a", "b", "c"), ("d", "e"), ("f",), ("g",)]
