"""The docs stay true: the configuration reference is generated from `Settings`, the README is a
short front door from which every document is reachable, and no link points nowhere (issue 18)."""
from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path
from urllib.parse import unquote

import settings
from ops.gen_config_doc import TARGET, description, main, render
from search.signal import REGISTRY

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
#: Documents other branches are writing, already in the README's map: a link to one of these may
#: point nowhere only while the file does not exist. Once a file lands, the test fails until its
#: entry is deleted here, so after the merge every link is checked.
PENDING: set[str] = set()
#: [text](target) and ![alt](target); the target up to a space (an optional title) or ')'.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


# --- configuration reference -------------------------------------------------------------------

def test_every_variable_has_a_one_line_description():
    names = [name for _, name, _ in settings.ENVIRONMENT]
    groups = [prefix for _, _, prefix in settings.WEIGHT_GROUPS]
    group_fields = {spec.name for _, group, _ in settings.WEIGHT_GROUPS for spec in fields(group)}
    signals = {s.name for s in REGISTRY}
    assert {spec.name for spec in fields(settings.Weights)} == signals, "one fusion weight per registered signal"
    wanted = set(names) | set(groups) | (group_fields - signals)
    missing = sorted(wanted - set(settings.DESCRIPTIONS))
    assert not missing, f"add a one-line description to settings.DESCRIPTIONS for: {missing}"
    stale = sorted(set(settings.DESCRIPTIONS) - wanted)
    assert not stale, f"settings.DESCRIPTIONS describes variables that do not exist (or signals, which describe themselves): {stale}"
    for key in [*wanted, *signals]:
        text = description(key)
        assert text.strip() and "\n" not in text, f"{key}: one non-empty line"


def test_every_setting_is_an_environment_variable():
    """No hidden knob: each Settings field is read from ENVIRONMENT or a weight group."""
    configurable = {attr for attr, _, _ in settings.ENVIRONMENT} | {attr for attr, _, _ in settings.WEIGHT_GROUPS}
    hidden = sorted({spec.name for spec in fields(settings.Settings)} - configurable)
    assert not hidden, f"add these Settings fields to settings.ENVIRONMENT: {hidden}"


def test_configuration_reference_is_generated_from_settings():
    assert TARGET.read_text(encoding="utf-8") == render(), \
        "docs/configuration.md is stale: run python ops/gen_config_doc.py > docs/configuration.md"
    assert main(["--check"]) == 0


def test_reference_shows_each_variable_with_its_real_default():
    text = render()
    for _, name, _ in settings.ENVIRONMENT:
        assert text.count(f"| `{name}` |") == 1, name
    row = next(line for line in text.splitlines() if line.startswith("| `SHORTLIST_K` |"))
    assert f"`{settings.Settings().shortlist_size}`" in row
    row = next(line for line in text.splitlines() if line.startswith("| `WEIGHT_EMBEDDING` |"))
    assert f"`{settings.Weights().embedding}`" in row
    assert "| `RATE_LIMIT_SEARCH` | `300/minute` |" in text  # a rate as the variable is written


def test_check_mode_fails_on_a_stale_reference(monkeypatch, tmp_path):
    import ops.gen_config_doc as gen
    stale = tmp_path / "configuration.md"
    stale.write_text(render().replace("prefilter shortlist size", "shortlist"), encoding="utf-8")
    monkeypatch.setattr(gen, "TARGET", stale)
    assert gen.main(["--check"]) == 1


# --- README and the docs map --------------------------------------------------------------------

def _links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)  # not inside code blocks
    return [target for target in LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:", target)]


def _local_target(source: Path, target: str) -> Path | None:
    """The file a relative link points at (None for an in-page anchor)."""
    path = unquote(target.split("#", 1)[0])
    return (source.parent / path).resolve() if path else None


def test_readme_is_a_short_front_door():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 250
    assert "make run" in text and "make test" in text  # the two commands (.ci/run calls make test)
    assert re.search(r"^run:", (ROOT / "Makefile").read_text(), re.M)
    assert re.search(r"^test:", (ROOT / "Makefile").read_text(), re.M)
    assert "docs/widget.png" in _links(README)


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, -N for repeats."""
    anchors: set[str] = set()
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchor, n = slug, 0
        while anchor in anchors:
            n += 1
            anchor = f"{slug}-{n}"
        anchors.add(anchor)
    return anchors


def test_every_link_in_the_docs_resolves():
    broken = []
    for source in [README, *sorted(DOCS.rglob("*.md"))]:
        for target in _links(source):
            path = _local_target(source, target) or source.resolve()
            anchor = target.partition("#")[2]
            if not path.exists():
                if not path.is_relative_to(ROOT) or str(path.relative_to(ROOT)) not in PENDING:
                    broken.append(f"{source.relative_to(ROOT)} -> {target}")
            elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
                broken.append(f"{source.relative_to(ROOT)} -> {target} (no such heading)")
    assert not broken, "links that point nowhere:\n" + "\n".join(broken)


def test_pending_documents_have_not_landed_yet():
    landed = sorted(name for name in PENDING if (ROOT / name).exists())
    assert not landed, f"these documents exist now: delete them from PENDING in tests/test_docs.py: {landed}"
    linked = {str(p.relative_to(ROOT)) for t in _links(README) if (p := _local_target(README, t)) is not None}
    assert PENDING <= linked, "every pending document is already in the README's map"


def test_every_document_is_linked_from_the_readme():
    """Every docs/*.md directly from the README's map, and every deeper document (docs/design/)
    through links from there: nothing moved out of the README is lost."""
    direct = {_local_target(README, t) for t in _links(README)}
    unlinked = sorted(str(p.relative_to(ROOT)) for p in DOCS.glob("*.md") if p.resolve() not in direct)
    assert not unlinked, f"link these from the README's map of the docs: {unlinked}"
    seen, todo = set(), [README.resolve()]
    while todo:
        page = todo.pop()
        if page in seen or page.suffix != ".md" or not page.exists():
            continue
        seen.add(page)
        todo.extend(p for t in _links(page) if (p := _local_target(page, t)) is not None)
    unreachable = sorted(str(p.relative_to(ROOT)) for p in DOCS.rglob("*.md") if p.resolve() not in seen)
    assert not unreachable, f"not reachable from the README: {unreachable}"
