"""Alembic environment: the database URL comes from the caller (catalog.db.upgrade) or DATABASE_URL."""
from alembic import context
from sqlalchemy import engine_from_config, pool

import admin.models  # noqa: F401  (registers the account tables on Base.metadata)
import evaluation.models  # noqa: F401  (the evaluation_runs table)
import analytics.models  # noqa: F401  (the search log and events tables)
import analytics.learning_models  # noqa: F401  (learned evidence, migration 0008)
import analytics.completion_models  # noqa: F401  (the completions' exclusion list, migration 0017)
from catalog.models import Base
from settings import Settings

config = context.config
url = config.get_main_option("sqlalchemy.url") or Settings.from_env().database
target_metadata = Base.metadata


def run_migrations_offline() -> None:
    context.configure(url=url, target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connectable = config.attributes.get("connection")
    if connectable is not None:
        context.configure(connection=connectable, target_metadata=target_metadata)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = engine_from_config({"sqlalchemy.url": url}, prefix="sqlalchemy.", poolclass=pool.NullPool)
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=target_metadata)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
