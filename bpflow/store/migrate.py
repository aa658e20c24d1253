"""`bpflow db upgrade`: bring a database to the latest schema with Alembic."""

from __future__ import annotations

from typing import Any

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy.engine import Connection, Engine
from sqlmodel import SQLModel

import bpflow.store.tables  # noqa: F401  (the models `drift` compares with)
from bpflow.store.connection import database_url, make_engine, normalize_url


def alembic_config(url: str | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", "bpflow.store:migrations")
    url = normalize_url(database_url(url))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))  # configparser syntax
    return cfg


def revision(conn: Connection) -> str | None:
    """The schema revision of the database, None when it has none yet (a new database)."""
    return MigrationContext.configure(conn).get_current_revision()


def upgrade(target: str | Engine | None = None) -> tuple[str | None, str | None]:
    """Create or migrate the schema of `target` (a URL or an Engine) to head; the revisions
    before (None for a new database) and after, so the caller can say what happened."""
    if isinstance(target, Engine):
        cfg = alembic_config(str(target.url))
        with target.begin() as conn:
            before = revision(conn)
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
            return before, revision(conn)
    engine = make_engine(target)
    try:
        return upgrade(engine)
    finally:
        engine.dispose()


def drift(conn: Connection) -> list[Any]:
    """What the database's schema lacks or has more than the models (Alembic's
    comparison), leaving out what the models create on other databases only
    (`Index(...).ddl_if(dialect=...)`, which Alembic does not read)."""
    dialect = conn.dialect.name

    def here(obj: Any, name: str | None, kind: str, reflected: bool, compare_to: Any) -> bool:
        only = getattr(obj, "_ddl_if", None)
        return reflected or only is None or only.dialect in (None, dialect)

    context = MigrationContext.configure(conn, opts={"include_object": here})
    return compare_metadata(context, SQLModel.metadata)
