"""Alembic environment: a sync engine on the app's database, SQLite or PostgreSQL (see
`store/migrate.py`); one history for both."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine
from sqlalchemy.pool import NullPool

from yolo_orch.store.databases import engine_url
from yolo_orch.store.schema import METADATA

config = context.config
target_metadata = METADATA
database_url = config.get_main_option("sqlalchemy.url")
if database_url is None:
    raise RuntimeError("set sqlalchemy.url; yolo_orch.store.migrate.alembic_config does")
url = engine_url(database_url)

if context.is_offline_mode():
    # `alembic upgrade --sql`: print the SQL for review instead of running it.
    context.configure(url=url, target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            # SQLite alters most tables by copying them; batch mode does that for us (on
            # PostgreSQL, batch operations are plain ALTER TABLEs).
            context.configure(
                connection=connection,
                target_metadata=target_metadata,
                render_as_batch=connection.dialect.name == "sqlite",
            )
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()
