"""ops/ stays true to the code: every metric the Grafana dashboard and the alert rules query
is one the app exports, and the rule and scrape files are valid for Prometheus.

Exported names come from a real app's /metrics text after a few requests: the sample names
plus, from the TYPE lines, the names a family yields even before it has a sample (a labelled
counter's `_total`, a histogram's `_bucket`/`_sum`/`_count`).
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

OPS = Path(__file__).resolve().parent.parent / "ops"
DASHBOARD = OPS / "grafana" / "taskfinder.json"
ALERTS = OPS / "alerts.yml"
RUNBOOKS = OPS / "runbooks.md"

SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count", "_created"),
            "summary": ("_sum", "_count", "_created"), "gauge": ("",), "untyped": ("",), "info": ("_info",)}
# PromQL words that look like identifiers but name no series
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or",
            "unless", "inf", "nan", "atan2"}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENTIFIER = re.compile(r"(?<![\w:.$])([A-Za-z_:][\w:]*)(?![\w:]|\s*\()")


def metric_names(expr: str) -> set[str]:
    """Series names in a PromQL expression: strings, label matchers, ranges, grouping clauses,
    function calls and keywords removed, what remains that is an identifier is a metric."""
    for pattern in (_STRING, _MATCHERS, _RANGE, _GROUPING):
        expr = pattern.sub(" ", expr)
    return {name for name in _IDENTIFIER.findall(expr) if name.lower() not in KEYWORDS}


def test_metric_name_extraction():
    expr = ('histogram_quantile(0.95, sum by (job, le) (rate(taskfinder_x_bucket{endpoint="/api/search", a=~"b|c"}'
            '[5m]))) > 1e3 and on (pid) time() - taskfinder_y offset 1d or job:rec:rate5m / $grafana_var')
    assert metric_names(expr) == {"taskfinder_x_bucket", "taskfinder_y", "job:rec:rate5m"}


def dashboard_exprs() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = [p for top in dashboard["panels"] for p in (top, *top.get("panels", []))]
    exprs = [t["expr"] for p in panels for t in p.get("targets", []) if t.get("expr")]
    # template variables: label_values(metric, label)
    exprs += [m.group(1) for v in dashboard["templating"]["list"]
              for m in [re.match(r"label_values\((\w+),", str(v.get("query", "")))] if m]
    return exprs


def alert_rules() -> list[dict]:
    return [rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]]


@pytest.fixture(scope="module")
def exported_names(demo_app) -> set[str]:
    client = demo_app.test_client()
    for path in ("/healthz", "/readyz", "/api/search?q=lead%20screening", "/api/search?q=", "/nope"):
        client.get(path)
    names = set()
    for family in text_string_to_metric_families(client.get("/metrics").get_data(as_text=True)):
        names |= {family.name + suffix for suffix in SUFFIXES.get(family.type, ("",))}
        names |= {sample.name for sample in family.samples}
    return names


def test_the_app_exports_the_metrics_of_the_issue(exported_names):
    assert {"taskfinder_http_requests_total", "taskfinder_http_request_duration_seconds_bucket",
            "taskfinder_stage_seconds_bucket", "taskfinder_rerank_calls_total", "taskfinder_embedding_calls_total",
            "taskfinder_rerank_dropped_entries_total", "taskfinder_circuit_breaker_state",
            "taskfinder_embedding_cache_lookups_total", "taskfinder_degraded_responses_total",
            "taskfinder_no_confident_match_searches_total", "taskfinder_zero_result_searches_total",
            "taskfinder_index_rebuilds_total", "taskfinder_index_rebuild_duration_seconds_count",
            "taskfinder_catalog_revision", "taskfinder_ranker_fit_id"} <= exported_names


def test_every_dashboard_metric_is_exported(exported_names):
    used = set().union(*map(metric_names, dashboard_exprs()))
    assert used, "the dashboard queries nothing"
    assert used - exported_names == set()


# Series Prometheus writes itself: `up` (1 when the target's last scrape succeeded)
PROMETHEUS_SERIES = {"up"}


def test_every_alert_metric_is_exported_or_recorded(exported_names):
    rules = alert_rules()
    recorded = {rule["record"] for rule in rules if "record" in rule}
    used = set().union(*(metric_names(rule["expr"]) for rule in rules))
    assert used - exported_names - recorded - PROMETHEUS_SERIES == set()
    assert recorded <= used, "a recording rule nothing uses"


def test_each_alert_has_a_runbook_section():
    headings = {re.sub(r"[^a-z0-9 -]", "", line.lstrip("# ").strip().lower()).replace(" ", "-")
                for line in RUNBOOKS.read_text().splitlines() if line.startswith("#")}
    alerts = [rule for rule in alert_rules() if "alert" in rule]
    assert len(alerts) >= 6
    for rule in alerts:
        base, anchor = rule["annotations"]["runbook_url"].split("#", 1)
        assert base == "{{ $externalLabels.runbook_base }}", rule["alert"]   # an absolute URL: a link
        assert anchor == rule["alert"].lower() and anchor in headings, rule["alert"]
    runbook_base = yaml.safe_load((OPS / "prometheus.yml").read_text())["global"]["external_labels"]["runbook_base"]
    assert re.fullmatch(r"https://\S+/ops/runbooks\.md", runbook_base)


def test_the_target_down_and_absent_metrics_and_both_latency_alerts_exist():
    exprs = {rule["alert"]: " ".join(rule["expr"].split()) for rule in alert_rules() if "alert" in rule}
    assert exprs["TaskfinderTargetDown"] == 'up{job="taskfinder"} == 0'
    assert "absent(" in exprs["TaskfinderMetricsAbsent"]
    assert 'kind="typeahead"' in exprs["TaskfinderTypeaheadLatencyHigh"]
    assert 'kind="rerank"' in exprs["TaskfinderRerankLatencyHigh"]
    assert "TaskfinderSearchLatencyHigh" not in exprs   # one alert for both budgets hid the type-ahead one


def test_labelled_counters_are_zero_on_a_fresh_healthy_app(tmp_path, shared_cache_dir):
    """A labelled counter that no request has touched yet still has its series, at 0: dashboards
    and alerts read 0, not "No data"."""
    from tests.conftest import build_app, close_app, make_settings

    app = build_app(make_settings(tmp_path, shared_cache_dir, EMBEDDINGS_ENABLED="0"), [], [])
    try:
        samples = {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
                   for family in text_string_to_metric_families(app.test_client().get("/metrics").get_data(as_text=True))
                   for sample in family.samples}
    finally:
        close_app(app)

    def value(name, **labels):
        return samples.get((name, tuple(sorted(labels.items()))))

    assert value("taskfinder_degraded_responses_total", flag="embeddings_unavailable") == 0
    assert value("taskfinder_rerank_dropped_entries_total", reason="malformed_json") == 0
    assert value("taskfinder_rerank_tokens_total", kind="prompt") == 0
    assert value("taskfinder_analytics_records_total", kind="search", outcome="dropped_full") == 0
    assert value("taskfinder_http_requests_total", endpoint="/api/search", status="500") == 0
    for kind in ("typeahead", "rerank"):
        assert value("taskfinder_search_duration_seconds_count", kind=kind) == 0


def test_searches_are_timed_by_kind(demo_app):
    client = demo_app.test_client()

    def count(kind):
        text = client.get("/metrics").get_data(as_text=True)
        return next(s.value for f in text_string_to_metric_families(text) for s in f.samples
                    if s.name == "taskfinder_search_duration_seconds_count" and s.labels["kind"] == kind)

    before = count("typeahead"), count("rerank")
    client.get("/api/search?q=kids shots&rerank=0")
    client.get("/api/search?q=kids shots&rerank=0")   # an answer-cache replay is a type-ahead search too
    client.get("/api/search?q=kids shots&rerank=1")
    assert (count("typeahead"), count("rerank")) == (before[0] + 2, before[1] + 1)


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (Debian: apt-get install prometheus)")
@pytest.mark.parametrize("command", [["check", "rules", str(ALERTS)], ["check", "config", str(OPS / "prometheus.yml")],
                                     ["test", "rules", str(OPS / "alerts.test.yml")]])
def test_promtool_accepts_the_rules_and_config(command, tmp_path):
    if command[:2] == ["check", "config"]:   # its scrape token file must exist: check a copy beside one
        for name in ("prometheus.yml", "alerts.yml"):
            shutil.copy(OPS / name, tmp_path / name)
        (tmp_path / "taskfinder_metrics_token").write_text("t" * 40 + "\n")
        command = ["check", "config", str(tmp_path / "prometheus.yml")]
    result = subprocess.run(["promtool", *command], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
