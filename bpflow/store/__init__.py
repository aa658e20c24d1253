"""The SQL store: templates, users, instances and their steps, history, mail and worker
leases in one database (an SQLite file by default, PostgreSQL or any SQLAlchemy URL).

    templates.py   template versions and the Template objects built from them
    users.py       users, passwords, roles
    instances.py   reading instances (with a cache), the rows of a start and of a step
    steps.py       starting instances and applying engine steps atomically
    queries.py     read-only lists and counts the API and the pages show
    mail.py        the mailbox table's rows
    leases.py      which instances have due work, and the workers' leases on them
    statements.py  the write path's SQL, each statement once, and its row layouts
    writing.py     the writer protocol and the SQLAlchemy writer
    sqlite_writer.py  the SQLite writer (sqlite3 straight, group commit)
    tables.py      the schema; migrations/ and migrate.py keep databases at it
    connection.py  engines, SQLite settings, waiting for the write lock

Everything outside this package uses `Store`'s public methods (and `reader()` for a
read-only connection); nothing else touches its private members.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from bpflow.errors import Conflict, NotFound
from bpflow.security import derive, load_secret
from bpflow.store.connection import make_engine
from bpflow.store.instances import Instances, Loaded
from bpflow.store.leases import Leases
from bpflow.store.mail import MailRows
from bpflow.store.queries import Queries
from bpflow.store.sqlite_writer import SqliteWriter
from bpflow.store.steps import Steps
from bpflow.store.templates import Templates
from bpflow.store.users import Users
from bpflow.store.writing import SqlAlchemyWriter, Writer
from engine.model import Template
from engine.runtime import Engine, utcnow

__all__ = ["Conflict", "NotFound", "Store"]


class Store(Templates, Users, Instances, Steps, Queries, MailRows, Leases):
    """Templates, instances, users, history, mail and leases in one SQL database."""

    def __init__(self, url: str | None = None, *, secret: bytes | None = None,
                 clock: Callable[[], datetime] = utcnow,
                 worker_actions: Iterable[str] = ("http", "mail", "approval"),
                 cache_size: int = 20000):
        self.db = make_engine(url)
        self.postgres = self.db.dialect.name == "postgresql"
        self.secret = secret or load_secret()
        self.clock = clock
        self.engine = Engine(derive(self.secret, "bookmarks"), clock)
        self.worker_actions = frozenset(worker_actions)
        self._templates: dict[tuple[int, tuple[tuple[str, int], ...]], Template] = {}
        self._template_rows: dict[int, Any] = {}
        self._nested_cache: dict[int, tuple[Any, frozenset[str]]] = {}
        self._evaluating: dict[int, tuple[Template, bool]] = {}  # see Steps.evaluates
        self._cache: OrderedDict[str, Loaded] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._on_due: Callable[[], None] | None = None
        database = self.db.url.database
        self._sqlite = (SqliteWriter(database) if self.db.dialect.name == "sqlite"
                        and database not in (None, "", ":memory:") else None)
        self.writer: Writer = self._sqlite or SqlAlchemyWriter(self.db)  # chosen once

    def on_due(self, callback: Callable[[], None] | None) -> None:
        """Call `callback` after a write of this store leaves work due now (the worker of
        this process listens, so it does not wait for its next poll)."""
        self._on_due = callback

    def reader(self):
        """A connection for reads (SQLite: a deferred transaction, no write lock)."""
        return self.db.connect().execution_options(sqlite_begin="DEFERRED")

    def close(self) -> None:
        self.writer.close()
        self.db.dispose()
