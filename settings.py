"""The one typed place where Taskfinder reads its configuration.

Every knob is an environment variable; `Settings.from_env()` parses and validates them once,
and the resulting frozen object is passed explicitly to whatever needs it (no module globals).
The README's "Configuration" table lists the same variables.
"""
from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Mapping

from infra.ratelimit import Rate, parse_rate

PROJECT_ROOT = Path(__file__).resolve().parent


class SettingsError(ValueError):
    """An environment variable holds a value of the wrong type or range."""


def _as_bool(name: str, raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off", ""}:
        return False
    raise SettingsError(f"{name}={raw!r}: expected a boolean (1/0, true/false, on/off)")


def _as_number(name: str, raw: str, cast: type, minimum: float) -> float:
    try:
        value = cast(raw)
    except ValueError as exc:
        kind = "an integer" if cast is int else "a number"
        raise SettingsError(f"{name}={raw!r}: expected {kind}") from exc
    if value < minimum:
        raise SettingsError(f"{name}={raw!r}: must be >= {minimum}")
    return value


@dataclass(frozen=True)
class Weights:
    """Fusion weights of the prefilter: score = sum_f w_f * x_f (see search.prefilter).

    The sparse signals (lexical, rationale, typo, exemplar) are coverage-normalised to [0, ~1];
    the dense ones (embedding, centroid, neighbour) are raw cosines, so their weights are larger.
    These are the SHIPPED DEFAULTS, used until a catalog has enough test cases for its own fit
    (search.fitting, stored in the database). They were fitted once on pooled cross-validated
    queries of four catalogs (the demo, the demo without cases, CLINC150 with 5 requests per
    intent, CLINC150 intent names alone; see `python -m search.defaults`), not on any one of them.
    """

    lexical: float = 0.0
    rationale: float = 0.44
    embedding: float = 71.63
    typo: float = 0.75
    exemplar: float = 3.27
    centroid: float = 25.29
    neighbour: float = 24.69
    prototype: float = 0.0      # exists only with a per-catalog fit (search.prototypes)


@dataclass(frozen=True)
class DegradedWeights(Weights):
    """Shipped default weights of the degraded mode (embeddings unavailable): the sparse
    signals alone, fitted separately rather than rescaled from the full mode."""

    lexical: float = 4.61
    rationale: float = 0.54
    embedding: float = 0.0
    typo: float = 3.92
    exemplar: float = 11.34
    centroid: float = 0.0
    neighbour: float = 0.0
    prototype: float = 0.0


@dataclass(frozen=True)
class FieldWeights:
    """BM25F field weights: a match in the task name counts more than one in help text."""

    name: float = 3.0
    aliases: float = 2.5
    category: float = 0.5
    help: float = 1.0


@dataclass(frozen=True)
class Settings:
    # storage
    database_url: str = ""
    data_dir: Path = PROJECT_ROOT / "instance"
    cache_path: Path | None = None
    # search
    shortlist_size: int = 15
    max_results: int = 50
    max_query_chars: int = 256
    weights: Weights = field(default_factory=Weights)
    degraded_weights: Weights = field(default_factory=DegradedWeights)
    field_weights: FieldWeights = field(default_factory=FieldWeights)
    typo_min_similarity: float = 80.0
    # Per-catalog fitting (search.fitting): use the newest fit stored for the catalog, refit in
    # the background whenever the test cases change, and fit only with enough in-scope cases.
    ranker_fit: bool = True
    auto_fit: bool = True
    fit_min_cases: int = 30
    # "No confident match" (search.confidence): abstain when the fitted abstention model says so.
    abstain: bool = True
    # The abstention's in-scope budget: the share of answerable (in-scope) queries it may refuse,
    # calibrated on the catalog's own cross-validated cases (search.fitting.conformal_threshold).
    abstain_budget: float = 0.05
    # Score the shipped generic off-topic memory (search.offtopic) as negatives in every fit.
    abstain_offtopic: bool = True
    catalog_enrichment: bool = False
    # How often each serving process reads the store revision (search.watcher) to notice edits
    # made by any process sharing the database; requests never read it themselves.
    revision_poll_s: float = 0.5
    # Finished answers without re-ranking kept per live index, per process (search.answer_cache):
    # a repeated type-ahead prefix costs a lookup. 0 switches the cache off.
    answer_cache_size: int = 1024
    # embeddings
    embeddings_enabled: bool = True
    embeddings_base_url: str = ""
    embeddings_model: str = "multilingual-e5-small-q4"
    embeddings_api_key: str = field(default="", repr=False)
    embeddings_timeout_s: float = 2.0
    embeddings_input_type: bool = False
    # LLM re-ranking
    llm_base_url: str = ""
    llm_model: str = "gemma3-270m"
    llm_api_key: str = field(default="", repr=False)
    llm_timeout_s: float = 20.0
    llm_response_format: str = "auto"
    rerank_default: bool = False
    rerank_skip_probability: float = 0.9
    breaker_failures: int = 3
    breaker_cooldown_s: float = 30.0
    # HTTP server: `python app.py serve` (waitress, one process) and gunicorn (ops/gunicorn.conf.py)
    host: str = "127.0.0.1"
    port: int = 8000
    web_workers: int = 2           # gunicorn worker processes; each holds its own index and models
    web_threads: int = 4           # threads per gunicorn worker (LLM calls wait on I/O)
    web_timeout_s: int = 120       # a worker silent this long is restarted; covers its index warm-up
    # Prometheus multiprocess mode (observability.metrics): a directory every worker writes its
    # samples to; must be in the environment before start (prometheus_client reads it at import)
    prometheus_multiproc_dir: Path | None = None
    # admin sessions (admin/): empty SECRET_KEY = a random key per process (sessions end on
    # restart and are not shared between processes; a warning is logged)
    secret_key: str = field(default="", repr=False)
    session_cookie_secure: bool = True
    session_lifetime_s: int = 8 * 3600
    login_max_failures: int = 5
    login_lockout_s: int = 15 * 60
    # roles for the public search API (search/roles.py): empty secret = role tokens refused
    role_token_secret: str = field(default="", repr=False)
    role_token_max_ttl_s: int = 900
    trusted_role_header: str = "X-Taskfinder-Roles"
    trusted_proxies: tuple[str, ...] = ()
    # the demo homepage at / (widget/): a page embedding the search widget over this catalog
    demo_homepage: bool = True
    # search analytics (analytics/): every /api/search is logged and the widget's events are
    # stored, both written by a background thread from a bounded in-memory queue
    analytics_enabled: bool = True
    analytics_retention_days: int = 90      # searches and events older than this are purged
    analytics_queue_size: int = 10_000      # pending writes (one per search or events request); full = dropped, counted
    analytics_flush_interval_s: float = 2.0 # how often the writer thread flushes the queue
    # CORS for the public API (search/cors.py): browser origins allowed to call /api/search,
    # /api/events and /api/kb/search; empty = same-origin only, "*" = any origin (never with credentials)
    cors_origins: tuple[str, ...] = ()
    # Redis (infra.ratelimit): rate limits and the login throttle shared by every worker and
    # host; empty = counted in each process (the embedded default, one process)
    redis_url: str = field(default="", repr=False)
    redis_key_prefix: str = "taskfinder:"
    # per-client rate limits (guard.limits): COUNT/UNIT strings parsed into Rate, None = off
    rate_limits: bool = True
    rate_limit_search: Rate | None = Rate(300, 60)
    rate_limit_events: Rate | None = Rate(600, 60)
    rate_limit_login: Rate | None = Rate(20, 60)

    @property
    def database(self) -> str:
        """DATABASE_URL, or an SQLite file under the data directory."""
        return self.database_url or f"sqlite:///{self.data_dir / 'taskfinder.db'}"

    @property
    def cache_dir(self) -> Path:
        """CACHE_DIR, or `cache/` under the data directory (embeddings, LLM answers)."""
        return self.cache_path or self.data_dir / "cache"

    def with_overrides(self, **changes) -> "Settings":
        return replace(self, **changes)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "Settings":
        env = os.environ if environ is None else environ
        values: dict = {}
        for attr, name, parse in ENVIRONMENT:
            raw = env.get(name)
            if raw not in (None, ""):
                values[attr] = parse(name, raw)
        for attr, group, prefix in (("weights", Weights, "WEIGHT_"), ("degraded_weights", DegradedWeights, "DEGRADED_WEIGHT_"),
                                    ("field_weights", FieldWeights, "FIELD_WEIGHT_")):
            values[attr] = group(**{
                f.name: _as_number(prefix + f.name.upper(), env[prefix + f.name.upper()], float, 0.0)
                for f in fields(group) if env.get(prefix + f.name.upper()) not in (None, "")
            })
        return cls(**values)


def _text(_name: str, raw: str) -> str:
    return raw


def _path(_name: str, raw: str) -> Path:
    return Path(raw)


def _int(minimum: int, maximum: int | None = None):
    def parse(name: str, raw: str) -> int:
        value = _as_number(name, raw, int, minimum)
        if maximum is not None and value > maximum:
            raise SettingsError(f"{name}={raw!r}: must be <= {maximum}")
        return value
    return parse


def _float(minimum: float):
    return lambda name, raw: _as_number(name, raw, float, minimum)


def _secret(minimum_chars: int):
    """A shared secret: long enough that guessing it is not an option."""
    def parse(name: str, raw: str) -> str:
        if len(raw) < minimum_chars:
            raise SettingsError(f"{name}=<hidden>: must be at least {minimum_chars} characters "
                                "(e.g. python -c 'import secrets; print(secrets.token_urlsafe(48))')")
        return raw
    return parse


_HEADER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,63}$")


def _header_name(name: str, raw: str) -> str:
    if not _HEADER_NAME.match(raw):
        raise SettingsError(f"{name}={raw!r}: expected an HTTP header name (letters, digits, '-')")
    return raw


def _networks(name: str, raw: str) -> tuple[str, ...]:
    """Comma-separated IP addresses or CIDR networks, normalised (`10.0.0.7` -> `10.0.0.7/32`)."""
    networks = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        try:
            networks.append(str(ipaddress.ip_network(item, strict=False)))
        except ValueError as exc:
            raise SettingsError(f"{name}={raw!r}: {item!r} is not an IP address or CIDR network") from exc
    return tuple(networks)


_ORIGIN = re.compile(r"https?://([a-z0-9.-]+|\[[0-9a-f:.]+\])(:[0-9]{1,5})?")


def _origins(name: str, raw: str) -> tuple[str, ...]:
    """Comma-separated browser origins (`scheme://host[:port]`, no path), lower-cased, or `*`."""
    origins = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        origin = item.lower()
        if origin != "*" and not _ORIGIN.fullmatch(origin):
            raise SettingsError(f"{name}={raw!r}: {item!r} is not an origin like https://www.example.org "
                                "(scheme and host, optional port, no path or trailing slash) nor '*'")
        origins.append(origin)
    return tuple(dict.fromkeys(origins))
def _rate(name: str, raw: str) -> Rate | None:
    try:
        return parse_rate(raw)
    except ValueError as exc:
        raise SettingsError(f"{name}={exc}") from None


def _probability(name: str, raw: str) -> float:
    value = _as_number(name, raw, float, 0.0)
    if value > 1.0:
        raise SettingsError(f"{name}={raw!r}: must be <= 1")
    return value


def _choice(*options: str):
    def parse(name: str, raw: str) -> str:
        if raw not in options:
            raise SettingsError(f"{name}={raw!r}: expected one of {', '.join(options)}")
        return raw
    return parse


# (Settings attribute, environment variable, parser): the README's configuration table.
ENVIRONMENT = (
    ("database_url", "DATABASE_URL", _text),
    ("data_dir", "TASKFINDER_DATA_DIR", _path),
    ("cache_path", "CACHE_DIR", _path),
    ("shortlist_size", "SHORTLIST_K", _int(1, 100)),
    ("max_results", "MAX_RESULTS", _int(1)),
    ("max_query_chars", "MAX_QUERY_CHARS", _int(1)),
    ("typo_min_similarity", "TYPO_MIN_SIMILARITY", _float(0.0)),
    ("ranker_fit", "RANKER_FIT", _as_bool),
    ("auto_fit", "AUTO_FIT", _as_bool),
    ("fit_min_cases", "FIT_MIN_CASES", _int(2)),
    ("abstain", "ABSTAIN", _as_bool),
    ("abstain_budget", "ABSTAIN_BUDGET", _probability),
    ("abstain_offtopic", "ABSTAIN_OFFTOPIC", _as_bool),
    ("catalog_enrichment", "CATALOG_ENRICHMENT", _as_bool),
    ("revision_poll_s", "REVISION_POLL_S", _float(0.01)),
    ("answer_cache_size", "ANSWER_CACHE_SIZE", _int(0, 1_000_000)),
    ("embeddings_enabled", "EMBEDDINGS_ENABLED", _as_bool),
    ("embeddings_base_url", "EMBEDDINGS_BASE_URL", _text),
    ("embeddings_model", "EMBEDDINGS_MODEL", _text),
    ("embeddings_api_key", "EMBEDDINGS_API_KEY", _text),
    ("embeddings_timeout_s", "EMBEDDINGS_TIMEOUT_S", _float(0.01)),
    ("embeddings_input_type", "EMBEDDINGS_INPUT_TYPE", _as_bool),
    ("llm_base_url", "LLM_BASE_URL", _text),
    ("llm_model", "LLM_MODEL", _text),
    ("llm_api_key", "LLM_API_KEY", _text),
    ("llm_timeout_s", "LLM_TIMEOUT_S", _float(0.01)),
    ("llm_response_format", "LLM_RESPONSE_FORMAT", _choice("auto", "json_schema", "json_object")),
    ("rerank_default", "RERANK_DEFAULT", _as_bool),
    ("rerank_skip_probability", "RERANK_SKIP_PROBABILITY", _probability),
    ("breaker_failures", "LLM_BREAKER_FAILURES", _int(1)),
    ("breaker_cooldown_s", "LLM_BREAKER_COOLDOWN_S", _float(0.0)),
    ("host", "HOST", _text),
    ("port", "PORT", _int(1, 65535)),
    ("web_workers", "WEB_CONCURRENCY", _int(1, 64)),
    ("web_threads", "WEB_THREADS", _int(1, 64)),
    ("web_timeout_s", "WEB_TIMEOUT_S", _int(10, 3600)),
    ("prometheus_multiproc_dir", "PROMETHEUS_MULTIPROC_DIR", _path),
    ("secret_key", "SECRET_KEY", _secret(32)),
    ("session_cookie_secure", "SESSION_COOKIE_SECURE", _as_bool),
    ("session_lifetime_s", "SESSION_LIFETIME_S", _int(60, 7 * 24 * 3600)),
    ("login_max_failures", "LOGIN_MAX_FAILURES", _int(1, 100)),
    ("login_lockout_s", "LOGIN_LOCKOUT_S", _int(1, 24 * 3600)),
    ("role_token_secret", "ROLE_TOKEN_SECRET", _secret(32)),
    ("role_token_max_ttl_s", "ROLE_TOKEN_MAX_TTL_S", _int(10, 24 * 3600)),
    ("trusted_role_header", "TRUSTED_ROLE_HEADER", _header_name),
    ("trusted_proxies", "TRUSTED_PROXIES", _networks),
    ("demo_homepage", "DEMO_HOMEPAGE", _as_bool),
    ("analytics_enabled", "ANALYTICS_ENABLED", _as_bool),
    ("analytics_retention_days", "ANALYTICS_RETENTION_DAYS", _int(1, 36500)),
    ("analytics_queue_size", "ANALYTICS_QUEUE_SIZE", _int(1, 1_000_000)),
    ("analytics_flush_interval_s", "ANALYTICS_FLUSH_INTERVAL_S", _float(0.01)),
    ("cors_origins", "CORS_ORIGINS", _origins),
    ("redis_url", "REDIS_URL", _text),
    ("redis_key_prefix", "REDIS_KEY_PREFIX", _text),
    ("rate_limits", "RATE_LIMITS", _as_bool),
    ("rate_limit_search", "RATE_LIMIT_SEARCH", _rate),
    ("rate_limit_events", "RATE_LIMIT_EVENTS", _rate),
    ("rate_limit_login", "RATE_LIMIT_LOGIN", _rate),
)
