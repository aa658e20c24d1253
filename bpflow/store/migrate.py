"""`bpflow db upgrade`: bring a database to the latest schema with Alembic."""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Engine

from bpflow.store.connection import database_url, make_engine, normalize_url


def alembic_config(url: str | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", "bpflow.store:migrations")
    url = normalize_url(database_url(url))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))  # configparser syntax
    return cfg


def upgrade(target: str | Engine | None = None) -> None:
    """Create or migrate the schema of `target` (a URL or an Engine) to head."""
    if isinstance(target, Engine):
        cfg = alembic_config(str(target.url))
        with target.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
        return
    engine = make_engine(target)
    try:
        upgrade(engine)
    finally:
        engine.dispose()
