"""The SQL store: templates, users, instances and their steps, history, mail and worker
leases in one database (an SQLite file by default, PostgreSQL or any SQLAlchemy URL).

    templates.py   template versions and the Template objects built from them
    users.py       users, passwords, roles
    instances.py   reading instances (with a cache), the rows of a start and of a step
    steps.py       starting instances and applying engine steps atomically
    queries.py     read-only lists and counts the API and the pages show
    substitutes.py who stands in for whom (SPEC §15's substitutes)
    drafts.py      templates being designed in the browser (SPEC §16), their authors'
    sandboxes.py   drafts tried before they are published (SPEC §16), in no list
    audit.py       the audit log: what admins did (SPEC §18), append-only
    operations.py  the operations page's lists and bulk operations' rows (SPEC §18)
    waits.py       durations: where instances wait, folded from the history (SPEC §18)
    mail.py        the mailbox table's rows
    leases.py      which instances have due work, and the workers' leases on them
    signals.py     signals delivered to the circles waiting for them
    feed.py        the event feed (read from the history), webhooks and deliveries
    files.py       uploads: their records, their bytes once per content hash
    migrating.py   moving running instances between template versions
    crowds.py      crowds: many instances started in one write, batch counts
    statements.py  the write path's SQL, each statement once, and its row layouts
    writing.py     what a write carries, the order of a step's writes, the driver protocol
    reads.py       small reads in each driver's form (`Store._rows`, `Instances._load_many`)
    sqlite/        the SQLite driver (sqlite3 straight, group commit)
    pg/            the PostgreSQL driver (psycopg, a step in one round trip, group commit)
    alchemy.py     the SQLAlchemy driver (any other database), the locked path's writes
    tables.py      the schema; migrations/ and migrate.py keep databases at it
    connection.py  engines, SQLite settings, waiting for the write lock
    parts.py       what the parts above use of one another, declared for the type checker

    changes/       committed steps and starts published to the pages (push, not poll)
    accounts.py    who a caller is, role names, usernames, password hashes
    keys.py        the server secret and the keys derived from it
    audience.py    whom a task names: the `a:`/`u:`/`r:` tokens, their one home
    errors.py      the errors the store raises
    public.py      what other rooms may name besides `Store`: errors, constants, a few
                   functions

Everything outside this package uses `Store`'s public methods (and `reader()` for a
read-only connection) and `public.py`; nothing else imports its modules or touches its
private members (the layer contracts in pyproject.toml check the imports). The store
imports nothing of the services.
"""

from __future__ import annotations

import copy
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from sqlalchemy import and_, true
from sqlalchemy.engine import Engine as SqlEngine

from bpflow.store.alchemy import SqlAlchemyDriver
from bpflow.store.audit import AuditLog
from bpflow.store.changes import Hub, hub_for
from bpflow.store.connection import make_engine
from bpflow.store.crowds import Crowds
from bpflow.store.drafts import Drafts
from bpflow.store.errors import Conflict, NotFound
from bpflow.store.feed import Feed
from bpflow.store.files import Files
from bpflow.store.instances import Instances, Loaded
from bpflow.store.keys import derive, load_secret
from bpflow.store.leases import Leases
from bpflow.store.mail import MailRows
from bpflow.store.migrating import Migrating
from bpflow.store.operations import Operations
from bpflow.store.pg.driver import PgDriver
from bpflow.store.pg.pools import conninfo
from bpflow.store.queries import Queries
from bpflow.store.reads import Straight
from bpflow.store.reuse import Reused
from bpflow.store.sandboxes import Sandboxes
from bpflow.store.signals import Signals
from bpflow.store.sqlite.driver import SqliteDriver
from bpflow.store.steps import Steps
from bpflow.store.substitutes import Substitutes
from bpflow.store.tables import DEFAULT_TENANT
from bpflow.store.templates import Templates
from bpflow.store.tenants import Tenants
from bpflow.store.users import Users
from bpflow.store.waits import Waits
from bpflow.store.writing import Driver
from engine.kinds import WORKER_RUN
from engine.model import Template
from engine.runtime import Engine, utcnow

__all__ = ["Conflict", "NotFound", "Store"]


class Store(Templates, Users, Instances, Steps, Queries, MailRows, Leases, Tenants, Signals,
            Feed, Migrating, Crowds, Substitutes, Files, Drafts, Sandboxes, AuditLog,
            Operations, Waits):
    """Templates, instances, users, history, mail and leases in one SQL database.

    A store is seen from one tenant (SPEC §12): `tenant`, `default` for the one a store
    opens as. `of(name)` is the same store seen from another tenant; every query and
    every row a store writes keeps to its tenant (`_here`), and an id of another
    tenant's object is not found. `of(None)` sees every tenant: the worker's view, whose
    instance ids come from its leases, never from a request.
    """

    tenant: str | None = DEFAULT_TENANT

    def __init__(self, url: str | None = None, *, secret: bytes | None = None,
                 clock: Callable[[], datetime] = utcnow,
                 worker_actions: Iterable[str] = WORKER_RUN,
                 cache_size: int = 20000):
        self.db = make_engine(url)
        self.postgres = self.db.dialect.name == "postgresql"
        self.secret = secret or load_secret()
        self.clock = clock
        self.engine = Engine(derive(self.secret, "bookmarks"), clock)
        self.worker_actions = frozenset(worker_actions)
        self._templates: dict[tuple[int, tuple[tuple[str, int], ...]], Template] = {}
        self._tried: OrderedDict[tuple[int, str, tuple[tuple[str, int], ...]], Template] = \
            OrderedDict()  # sandboxes' (Templates._tried_template)
        self._template_rows: dict[int, Any] = {}
        self._nested_cache: dict[int, tuple[Any, frozenset[str]]] = {}
        self._evaluating: dict[int, tuple[Template, bool]] = {}  # see Steps.evaluates
        self._cache: OrderedDict[str, Loaded] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._due_hook: list[Callable[[], None] | None] = [None]  # shared by the views
        # called after committed steps: their tenants, the commit's seconds (metrics)
        self._step_hook: list[Callable[[list[str], float | None], None] | None] = [None]
        # what each step runs inside (a trace's span: `on_step_span`), none when unset
        self._span_hook: list[Callable[..., AbstractContextManager[Any]] | None] = [None]
        self._accounts = Reused()
        self._latest = Reused()
        self._users = Reused()
        self._quota_cache = Reused()
        self._views: dict[str | None, Store] = {DEFAULT_TENANT: self}
        self.driver: Driver = driver_for(self.db)  # chosen once
        # where committed steps and starts are published for the pages (`bpflow.store.changes`):
        # one hub per database and process, shared by the views
        self.changes: Hub = hub_for(
            conninfo(self.db) if self.postgres
            else self.db.url.render_as_string(hide_password=False),
            self.postgres, self.driver.file)

    def on_due(self, callback: Callable[[], None] | None) -> None:
        """Call `callback` after a write of this store leaves work due now (the worker of
        this process listens, so it does not wait for its next poll)."""
        self._due_hook[0] = callback

    def on_steps(self, callback: Callable[[list[str], float | None], None] | None) -> None:
        """Call `callback(tenants, seconds)` after steps of this store are committed: the
        tenant of each, the seconds their commit took (`bpflow.metrics`)."""
        self._step_hook[0] = callback

    def on_step_span(self, factory: Callable[..., AbstractContextManager[Any]] | None
                     ) -> None:
        """Run each step of this store inside `factory(name, **attributes)`, a context
        manager (`bpflow.tracing.span`: a span per step)."""
        self._span_hook[0] = factory

    @property
    def _on_due(self) -> Callable[[], None] | None:
        return self._due_hook[0]

    def of(self, tenant: str | None) -> Store:
        """This store seen from `tenant` (None: every tenant, for the worker). The views
        share everything but their tenant: the database, the driver, the caches."""
        view = self._views.get(tenant)
        if view is None:
            view = copy.copy(self)
            view.tenant = tenant
            view._retired = None
            view = self._views.setdefault(tenant, view)
        return view

    def _here(self, table):
        """The condition keeping a query to this store's tenant (always true for the
        worker's view of every tenant)."""
        return true() if self.tenant is None else table.c.tenant == self.tenant

    def _listed(self, table):
        """`_here`, and no sandbox (SPEC §16: a draft tried in the designer is in no
        list, count, feed or quota): the condition of every read of many instances or
        template versions (`table`: `instances` or `templates`)."""
        return and_(self._here(table), table.c.sandbox.is_(False))

    def _owner(self) -> str:
        """The tenant new rows of this store belong to (a view of every tenant writes
        none)."""
        if self.tenant is None:
            raise RuntimeError("the view of every tenant cannot create rows")
        return self.tenant

    def reader(self):
        """A connection for reads (SQLite: a deferred transaction, no write lock)."""
        return self.db.connect().execution_options(sqlite_begin="DEFERRED")

    def _nothing_to_claim(self, query: Any) -> bool:
        """Whether a claim's `query` finds no row, looked at on SQLite without the write
        lock (a worker's every round asks; one that finds nothing then waits for no
        writer). PostgreSQL's claims skip locked rows and never wait: False there."""
        if self.postgres:
            return False
        with self.reader() as conn:
            return conn.execute(query.limit(1)).first() is None

    def _rows(self, read: Straight, values: dict[str, Any]) -> list[Any]:
        """The rows of a small read (`reads`) for `values`, keyed by its parameters'
        names without `b_`, through the store's driver (sqlite3, psycopg or SQLAlchemy)."""
        return self.driver.rows((read, values))[0]

    def close(self) -> None:
        self.driver.close()
        self.db.dispose()


def driver_for(db: SqlEngine) -> Driver:
    """The driver of a store's database, chosen once, when it opens: sqlite3 straight for
    an SQLite file, psycopg straight for PostgreSQL (unless `BPFLOW_PG_WRITER=sqlalchemy`:
    the previous writer, kept for comparison), SQLAlchemy otherwise (in-memory SQLite)."""
    database = db.url.database
    if db.dialect.name == "sqlite" and database not in (None, "", ":memory:"):
        return SqliteDriver(database)
    if db.dialect.name == "postgresql" and os.environ.get("BPFLOW_PG_WRITER") != "sqlalchemy":
        return PgDriver(db)
    return SqlAlchemyDriver(db)
