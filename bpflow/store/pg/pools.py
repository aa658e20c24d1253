"""The PostgreSQL driver's connections: each thread's own for its writes, a few shared
for reads, all made with the settings of `PLANS`; and the ANALYZE of a new database's
tables as they fill (`ANALYZE_AT`)."""

from __future__ import annotations

import logging
import os
import threading
import time

import orjson
import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.types.json import set_json_loads
from sqlalchemy.engine import Engine

from bpflow.store.pg.statements import quote

log = logging.getLogger(__name__)

IDLE_CHECK_S = 10.0  # a connection idle this long is checked before it writes
READERS = 4  # connections a driver keeps for reads (`rows`); more reads at once wait
# A driver's connections plan each prepared statement once: the server's default re-plans
# the step's statement for its parameters from time to time, and a plan of it costs about
# as much as running it (steps/s, 3,000 steps, six runs in turns with the default: one flow
# median 866 against 806, 16 flows 1,878 against 1,628; always re-planned: 470-600 and
# 1,000-1,275).
# They also cost a read by key as the server's pages cached (`random_page_cost` 1.1, the
# usual setting for SSDs, against the default's 4 for spinning disks): with the default,
# the foreign-key checks inside a step scanned a table of a few hundred rows whole rather
# than go by its key (see ANALYZE_AT), and kept doing so as it grew.
PLANS = "-c plan_cache_mode=force_generic_plan -c random_page_cost=1.1"
# A new database's tables have no statistics until autovacuum analyzes them (a minute or
# more after they start to fill): meanwhile PostgreSQL checks the foreign keys to
# `instances` through its (tenant, created_at) index, reading every instance of the tenant
# for each new row (its estimates without statistics tie, and that index is the smaller).
# A connection keeps the plans of those checks until the table's statistics change, so
# they are made again as the tables fill: when this process has started ANALYZE_AT[i]
# instances, the tables whose statistics are missing or describe less than half of the
# table are analyzed (`analyze_stale_tables`). Analyzed, the checks go by the key.
ANALYZE_AT = (64, 512)
STALE = ("SELECT relname FROM pg_class WHERE relnamespace = current_schema()::regnamespace"
         " AND relname IN ('instances', 'templates', 'users') AND (reltuples < 0"
         " OR pg_relation_size(oid) > 2 * relpages * current_setting('block_size')::int)")


def conninfo(db: Engine) -> str:
    """The libpq address of an SQLAlchemy engine's URL."""
    return db.url.set(drivername="postgresql").render_as_string(hide_password=False)


def planned(address: str) -> str:
    """The address for the driver's connections: the same, with `PLANS` among its
    options (beside the URL's own, e.g. a schema's search_path)."""
    params = conninfo_to_dict(address)
    params["options"] = f"{params.get('options', '')} {PLANS}".strip()
    return make_conninfo("", **params)


class Connections:
    """The connections of a `PgDriver` (part of it): `_own` gives this thread's for its
    writes, `_reader` an idle one of the READERS shared for reads, `_connect` makes one."""

    def __init__(self, conninfo: str):
        self.conninfo = conninfo
        self._lock = threading.Lock()
        self._local = threading.local()
        self._conns: list[psycopg.Connection] = []
        self._started = 0  # instances started through this driver, up to ANALYZE_AT[-1]
        self._readers: list[tuple[int, psycopg.Connection, float]] = []  # idle: pid, used
        self._reading = threading.BoundedSemaphore(READERS)

    def _count_starts(self, n: int) -> None:
        if self._started >= ANALYZE_AT[-1]:
            return
        with self._lock:
            before, self._started = self._started, self._started + n
        if any(before < mark <= self._started for mark in ANALYZE_AT):
            threading.Thread(target=self.analyze_stale_tables, daemon=True,
                             name="bpflow-analyze").start()

    def analyze_stale_tables(self) -> list[str]:
        """ANALYZE the tables whose plans matter while their statistics are missing or
        out of date (see ANALYZE_AT): the cached plans of every connection are then made
        again. The names analyzed."""
        try:
            with psycopg.connect(self.conninfo, autocommit=True) as conn:
                names = [name for (name,) in conn.execute(STALE)]
                for name in names:
                    conn.execute(f"ANALYZE {quote(name)}")
                return names
        except psycopg.Error as exc:  # only a matter of speed: autovacuum will do it
            log.warning("analyzing a new database's tables failed: %s", exc)
            return []

    def _reader(self) -> psycopg.Connection:
        """An idle read connection of this process (checked when it was idle long
        enough to have been dropped), else a new one. Reads share READERS connections
        whatever thread they come from: a connection per thread, as writes have, ran
        the server out of connections under a web server's thread pool."""
        while True:
            with self._lock:
                idle = self._readers.pop() if self._readers else None
            if idle is None:
                return self._connect()
            pid, conn, used = idle
            if pid == os.getpid() and not conn.closed and (
                    time.monotonic() - used < IDLE_CHECK_S or _alive(conn)):
                return conn

    def _own(self) -> psycopg.Connection:
        """This thread's connection (made anew when there is none, it broke, it was
        inherited through a fork, or it was idle long enough to have been dropped)."""
        pid, conn, used = getattr(self._local, "conn", (None, None, 0.0))
        now = time.monotonic()
        if conn is not None and pid == os.getpid() and not conn.closed and (
                now - used < IDLE_CHECK_S or _alive(conn)):
            self._local.conn = (pid, conn, now)
            return conn
        conn = self._connect()
        self._local.conn = (os.getpid(), conn, now)
        return conn

    def _connect(self) -> psycopg.Connection:
        conn = psycopg.connect(self.conninfo, autocommit=True)
        set_json_loads(orjson.loads, conn)  # for `rows`
        with self._lock:
            self._conns.append(conn)
        return conn

    def _close_connections(self) -> None:
        with self._lock:
            conns, self._conns = self._conns, []
            self._readers = []
            self._local = threading.local()
        for conn in conns:
            conn.close()


def _alive(conn: psycopg.Connection) -> bool:
    try:
        conn.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


async def alive_async(conn: psycopg.AsyncConnection) -> bool:
    try:
        await conn.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False
