"""Import validation: bad rows are named by line and field, and nothing is half-imported."""
import json

import pytest
from click.testing import CliRunner

from catalog.formats import ImportRejected, load_cases_file, load_tasks_file, write_catalog
from catalog.records import TaskRecord


def write_lines(path, rows):
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


GOOD = {"id": "health.asq3", "name": "ASQ-3 Screening", "help": "Ages and Stages"}


def test_every_bad_row_is_reported_with_its_line_and_field(tmp_path):
    path = write_lines(tmp_path / "catalog.jsonl", [
        GOOD,
        {"id": "x", "name": "", "help": "empty name"},
        '{"id": "broken", ',
        {"id": "y", "name": "Y", "help": "h", "roles": "director"},
        {"id": "health.asq3", "name": "Duplicate", "help": ""},
        {"id": "z", "name": "Z", "help": "h", "colour": "red"},
        {"name": "no id", "help": ""},
    ])
    with pytest.raises(ImportRejected) as caught:
        load_tasks_file(path)
    errors = caught.value.errors
    assert any(e.startswith("line 2: field 'name'") for e in errors)
    assert any(e.startswith("line 3: invalid JSON") for e in errors)
    assert any(e.startswith("line 4: field 'roles'") for e in errors)
    assert any("line 5: field 'id': duplicate id 'health.asq3'" in e for e in errors)
    assert any(e.startswith("line 6: field '(row)'") and "colour" in e for e in errors)
    assert any(e.startswith("line 7: field '(row)'") and "'id' is a required property" in e for e in errors)


def test_cases_must_name_known_tasks_and_at_most_five(tmp_path):
    path = write_lines(tmp_path / "cases.jsonl", [
        {"query": "ASQ", "gold": ["health.asq3"], "rationale": "r", "category": "abbreviation"},
        {"query": "ghost", "gold": ["health.nope"]},
        {"query": "many", "gold": [f"t{i}" for i in range(6)]},
        {"query": "bad category", "gold": [], "category": "spelling"},
        {"query": "ASQ", "gold": ["health.asq3"]},
    ])
    with pytest.raises(ImportRejected) as caught:
        load_cases_file(path, {"health.asq3"})
    errors = caught.value.errors
    assert "line 2: field 'gold': unknown task id 'health.nope'" in errors
    assert any(e.startswith("line 3: field 'gold'") and "too long" in e for e in errors)
    assert any(e.startswith("line 4: field 'category'") for e in errors)
    assert any(e.startswith("line 5: field 'query': duplicate") for e in errors)


def test_csv_catalog_round_trips(tmp_path):
    tasks = [TaskRecord(id="a", name="A, with comma", help='He said "hi"', category="health",
                        aliases=("one", "two"), url="/a", roles=("director",)),
             TaskRecord(id="b", name="B", help="")]
    path = tmp_path / "catalog.csv"
    write_catalog(path, tasks)
    assert load_tasks_file(path) == tasks


def test_not_utf8_is_rejected_clearly(tmp_path):
    path = tmp_path / "catalog.jsonl"
    path.write_bytes(b'{"id": "a", "name": "\xff", "help": ""}\n')
    with pytest.raises(ImportRejected, match="not UTF-8"):
        load_tasks_file(path)


def test_cli_import_rejects_a_bad_file_whole_and_writes_nothing(demo_app, tmp_path):
    from app import create_app
    from catalog import db

    app = create_app(demo_app.config["SETTINGS"].with_overrides(data_dir=tmp_path))
    store = app.extensions["taskfinder"].store
    db.upgrade(store.engine)
    path = write_lines(tmp_path / "catalog.jsonl", [GOOD, {"id": "b", "name": "B"}])
    result = app.test_cli_runner().invoke(args=["import-catalog", str(path)])
    assert result.exit_code != 0
    assert "line 2: field '(row)': 'help' is a required property" in result.output
    assert store.tasks() == []
    ok = write_lines(tmp_path / "ok.jsonl", [GOOD])
    result = app.test_cli_runner().invoke(args=["import-catalog", str(ok)])
    assert result.exit_code == 0, result.output
    assert [t.id for t in store.tasks()] == ["health.asq3"]
    out = tmp_path / "export.csv"
    assert app.test_cli_runner().invoke(args=["export-catalog", str(out)]).exit_code == 0
    assert load_tasks_file(out) == store.tasks()


def test_cli_migrates_loads_the_demo_and_round_trips_cases(tmp_path, shared_cache_dir):
    from app import create_app
    from tests.conftest import make_settings

    app = create_app(make_settings(tmp_path, shared_cache_dir))
    runner = app.test_cli_runner()
    assert runner.invoke(args=["db", "upgrade"]).exit_code == 0
    result = runner.invoke(args=["load-demo"])
    assert result.exit_code == 0 and "'created': 200" in result.output
    assert "already loaded" in runner.invoke(args=["load-demo"]).output
    store = app.extensions["taskfinder"].store
    before = store.cases()
    bad = write_lines(tmp_path / "bad_cases.jsonl", [{"query": "new one", "gold": ["health.asq3-screening"]},
                                                     {"query": "ghost", "gold": ["no.such-task"]}])
    result = runner.invoke(args=["import-cases", str(bad)])
    assert result.exit_code != 0 and "line 2: field 'gold': unknown task id 'no.such-task'" in result.output
    assert store.cases() == before
    out = tmp_path / "cases.jsonl"
    assert runner.invoke(args=["export-cases", str(out)]).exit_code == 0
    assert len(out.read_text().splitlines()) == len(before) == 258
