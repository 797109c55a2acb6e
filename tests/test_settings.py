"""Configuration: every variable parses into the typed Settings, and bad values name themselves."""
from pathlib import Path

import pytest

from settings import ENVIRONMENT, Settings, SettingsError, Weights


def test_defaults_need_no_environment():
    settings = Settings.from_env({})
    assert settings.database.startswith("sqlite:///") and settings.shortlist_size == 15
    assert settings.ranker_fit and settings.auto_fit and settings.abstain and settings.fit_min_cases == 30
    assert settings.weights == Weights() and settings.degraded_weights.embedding == 0.0


def test_every_variable_is_read():
    env = {"DATABASE_URL": "postgresql+psycopg://u@h/db", "TASKFINDER_DATA_DIR": "/tmp/x", "CACHE_DIR": "/tmp/c",
           "SHORTLIST_K": "20", "ABSTAIN": "0", "RERANK_DEFAULT": "on", "AUTO_FIT": "off",
           "RERANK_SKIP_PROBABILITY": "0.75", "DEGRADED_WEIGHT_LEXICAL": "7", "FIT_MIN_CASES": "12", "LLM_RESPONSE_FORMAT": "json_object",
           "WEIGHT_EMBEDDING": "0.5", "FIELD_WEIGHT_NAME": "4", "PORT": "9000", "EMBEDDINGS_INPUT_TYPE": "1"}
    settings = Settings.from_env(env)
    assert settings.database == "postgresql+psycopg://u@h/db"
    assert settings.cache_dir == Path("/tmp/c") and settings.shortlist_size == 20
    assert not settings.abstain and not settings.auto_fit and settings.rerank_default and settings.embeddings_input_type
    assert settings.rerank_skip_probability == 0.75 and settings.degraded_weights.lexical == 7.0
    assert settings.fit_min_cases == 12
    assert settings.llm_response_format == "json_object" and settings.port == 9000
    assert settings.weights.embedding == 0.5 and settings.weights.lexical == Weights().lexical
    assert settings.field_weights.name == 4.0
    assert len({name for _, name, _ in ENVIRONMENT}) == len(ENVIRONMENT)


@pytest.mark.parametrize("name, value, message", [
    ("SHORTLIST_K", "0", "must be >= 1"), ("SHORTLIST_K", "500", "must be <= 100"),
    ("SHORTLIST_K", "ten", "expected an integer"), ("WEIGHT_TYPO", "-1", "must be >= 0"),
    ("RERANK_DEFAULT", "perhaps", "expected a boolean"), ("LLM_RESPONSE_FORMAT", "xml", "expected one of"),
    ("LLM_TIMEOUT_S", "soon", "expected a number"),
    ("SECRET_KEY", "short", "at least 32 characters"), ("ROLE_TOKEN_SECRET", "x" * 31, "at least 32 characters"),
    ("SESSION_COOKIE_SECURE", "maybe", "expected a boolean"), ("LOGIN_MAX_FAILURES", "0", "must be >= 1"),
    ("ROLE_TOKEN_MAX_TTL_S", "999999", "must be <="), ("TRUSTED_PROXIES", "10.0.0.1, proxy.local", "not an IP"),
    ("TRUSTED_ROLE_HEADER", "X Roles", "HTTP header name"), ("SESSION_LIFETIME_S", "5", "must be >= 60"),
])
def test_bad_values_are_rejected_with_the_variable_named(name, value, message):
    with pytest.raises(SettingsError, match=f"{name}=.*{message}") as raised:
        Settings.from_env({name: value})
    if "SECRET" in name:
        assert value not in str(raised.value)  # a secret is not echoed, even a bad one


def test_admin_and_role_settings():
    defaults = Settings.from_env({})
    assert defaults.secret_key == "" and defaults.session_cookie_secure is True
    assert defaults.role_token_secret == "" and defaults.trusted_proxies == ()
    assert defaults.trusted_role_header == "X-Taskfinder-Roles" and defaults.role_token_max_ttl_s == 900
    env = {"SECRET_KEY": "k" * 40, "SESSION_COOKIE_SECURE": "0", "SESSION_LIFETIME_S": "3600",
           "LOGIN_MAX_FAILURES": "3", "LOGIN_LOCKOUT_S": "60", "ROLE_TOKEN_SECRET": "r" * 32,
           "ROLE_TOKEN_MAX_TTL_S": "120", "TRUSTED_ROLE_HEADER": "X-Roles", "TRUSTED_PROXIES": "10.0.0.1, 192.168.0.0/16,"}
    settings = Settings.from_env(env)
    assert settings.secret_key == "k" * 40 and settings.session_cookie_secure is False
    assert (settings.session_lifetime_s, settings.login_max_failures, settings.login_lockout_s) == (3600, 3, 60)
    assert settings.role_token_max_ttl_s == 120 and settings.trusted_role_header == "X-Roles"
    assert settings.trusted_proxies == ("10.0.0.1/32", "192.168.0.0/16")


def test_secrets_stay_out_of_the_settings_repr():
    settings = Settings.from_env({"SECRET_KEY": "k" * 40, "ROLE_TOKEN_SECRET": "r" * 40, "LLM_API_KEY": "sk-llm"})
    assert "k" * 40 not in repr(settings) and "r" * 40 not in repr(settings) and "sk-llm" not in repr(settings)


def test_serving_settings():
    defaults = Settings.from_env({})
    assert (defaults.web_workers, defaults.web_threads, defaults.web_timeout_s) == (2, 4, 120)
    assert defaults.prometheus_multiproc_dir is None
    settings = Settings.from_env({"WEB_CONCURRENCY": "4", "WEB_THREADS": "8", "WEB_TIMEOUT_S": "300",
                                  "PROMETHEUS_MULTIPROC_DIR": "/tmp/prom"})
    assert (settings.web_workers, settings.web_threads, settings.web_timeout_s) == (4, 8, 300)
    assert settings.prometheus_multiproc_dir == Path("/tmp/prom")
    with pytest.raises(SettingsError, match="WEB_CONCURRENCY=.*must be >= 1"):
        Settings.from_env({"WEB_CONCURRENCY": "0"})
