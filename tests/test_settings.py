"""Configuration: every variable parses into the typed Settings, and bad values name themselves."""
from pathlib import Path

import pytest

from settings import ENVIRONMENT, Settings, SettingsError


def test_defaults_need_no_environment():
    settings = Settings.from_env({})
    assert settings.database.startswith("sqlite:///") and settings.shortlist_size == 15
    assert (settings.weights.lexical, settings.weights.embedding) == (1.0, 2.0)


def test_every_variable_is_read():
    env = {"DATABASE_URL": "postgresql+psycopg://u@h/db", "TASKFINDER_DATA_DIR": "/tmp/x", "CACHE_DIR": "/tmp/c",
           "SHORTLIST_K": "20", "MIN_CONFIDENCE": "0", "RERANK_DEFAULT": "on", "LLM_RESPONSE_FORMAT": "json_object",
           "WEIGHT_EMBEDDING": "0.5", "FIELD_WEIGHT_NAME": "4", "PORT": "9000", "EMBEDDINGS_INPUT_TYPE": "1"}
    settings = Settings.from_env(env)
    assert settings.database == "postgresql+psycopg://u@h/db"
    assert settings.cache_dir == Path("/tmp/c") and settings.shortlist_size == 20
    assert settings.min_confidence == 0 and settings.rerank_default and settings.embeddings_input_type
    assert settings.llm_response_format == "json_object" and settings.port == 9000
    assert settings.weights.embedding == 0.5 and settings.weights.lexical == 1.0
    assert settings.field_weights.name == 4.0
    assert len({name for _, name, _ in ENVIRONMENT}) == len(ENVIRONMENT)


@pytest.mark.parametrize("name, value, message", [
    ("SHORTLIST_K", "0", "must be >= 1"), ("SHORTLIST_K", "500", "must be <= 100"),
    ("SHORTLIST_K", "ten", "expected an integer"), ("WEIGHT_TYPO", "-1", "must be >= 0"),
    ("RERANK_DEFAULT", "perhaps", "expected a boolean"), ("LLM_RESPONSE_FORMAT", "xml", "expected one of"),
    ("LLM_TIMEOUT_S", "soon", "expected a number"),
])
def test_bad_values_are_rejected_with_the_variable_named(name, value, message):
    with pytest.raises(SettingsError, match=f"{name}=.*{message}"):
        Settings.from_env({name: value})
